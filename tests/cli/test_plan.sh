#!/usr/bin/env bash
# shardfs-plan: its messages, its summary, and its plans against the
# independent Python implementation of docs/plan.md.
. "$(dirname "$0")/../lib.sh"

shardfs-mkdata "$T/tar" --format tar --shards 11 --samples 1-60 --size 1-64 --seed 5
shardfs-mkdata "$T/jsonl" --format jsonl --shards 7 --samples 5-50 --seed 6
shardfs-index "$T/tar" --quiet --no-hash
shardfs-index "$T/jsonl" --quiet --no-hash

for src in tar jsonl; do
	for o in "${PLAN_OPTION_SETS[@]}"; do
		expect_reference "$T/$src" "$T/$src/.shardfs/manifest.json" "$o"
	done
done

# more units than one chunk of a pass's layout (65536, laid out on
# threads): 140 000 one-sample units; the epoch begins at position 90 000
# of a pass (in its second chunk) and ends inside another
shardfs-mkdata "$T/big" --format jsonl --shards 4 --samples 35000 --size 1 --seed 3
shardfs-index "$T/big" --quiet --no-hash
for o in shuffle=units,block=1,world=3,workers=2,epoch_size=230000,epoch=1,start=5 \
	shuffle=samples,block=3,world=2,workers=2,epoch=1; do
	expect_reference "$T/big" "$T/big/.shardfs/manifest.json" "$o"
done

expect_run "world=0" 2 "shardfs-plan: world=0 is out of range: use an integer in 1..65536" \
	-- shardfs-plan "$T/tar" -o world=0
expect_run "rank out of range" 2 "shardfs-plan: rank=8 is out of range for world=8: ranks are 0..7" \
	-- shardfs-plan "$T/tar" -o world=8,rank=8
n=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["samples"])' "$T/jsonl/.shardfs/manifest.json")
expect_run "drop leaves nothing" 2 \
	"shardfs-plan: remainder=drop leaves 0 samples per reader: $n samples for world=1024 × workers=2; use remainder=pad or fewer readers" \
	-- shardfs-plan "$T/jsonl" -o world=1024,workers=2,remainder=drop
expect_run "no index" 2 "shardfs-plan: $T/tar/x/.shardfs/manifest.json: no index; build it with: shardfs-index $T/tar/x" \
	-- bash -c "mkdir -p '$T/tar/x' && shardfs-plan '$T/tar/x'"
rmdir "$T/tar/x"

echo '{"extra": 1}' >> "$T/jsonl/shard-000003.jsonl"
size=$(stat -c %s "$T/jsonl/shard-000003.jsonl")
expect_run "stale index" 2 \
	"shardfs-plan: the index is stale: 1 shard file changed since it was built: shard-000003.jsonl (size $size, the index says $((size - 13))); rebuild it with: shardfs-index $T/jsonl" \
	-- shardfs-plan "$T/jsonl"

out=$(shardfs-plan "$T/tar" -o world=2,workers=2,rank=1)
expect_eq "summary shows only rank 1" "$(echo "$out" | awk 'NR > 3 {print $1 "/" $2}' | tr '\n' ' ')" "1/0 1/1 "

# replicas: consecutive ranks read the same share; a group size that does
# not divide world is refused
expect_run "replicas must divide world" 2 \
	"shardfs-plan: replicas=3 does not divide world=8: every group of replicas holds the same number of ranks; use a divisor of 8" \
	-- shardfs-plan "$T/tar" -o world=8,replicas=3
out=$(shardfs-plan "$T/tar" -o world=4,workers=2,replicas=2)
expect_eq "replicas: ranks 0 and 1 read the same share" \
	"$(echo "$out" | awk '$1 == 0 || $1 == 1 {print $2, $3, $4, $5, $8}' | sort | uniq -c | awk '{print $1}' | tr '\n' ' ')" "2 2 "
shardfs-plan "$T/tar" -o world=4,workers=2,replicas=2,epoch=3 --json > "$T/r.json"
shardfs-plan "$T/tar" -o world=2,workers=2,epoch=3 --json > "$T/w2.json"
expect_eq "replicas=2 of world=4 is the plan of world=2" \
	"$(python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["readers"]))' "$T/r.json")" \
	"$(python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["readers"]))' "$T/w2.json")"
# --- a source that grows: its windows as it stands (docs/follow.md) ---
mkdir "$T/grow"
printf 'a\nb\nc' > "$T/grow/c1.jsonl"
printf 'd\ne\nf\ng\n' > "$T/grow/c2.jsonl"
printf 'x\n' > "$T/grow/c3.jsonl.tmp"
expect_eq "plan --window: the complete windows, each reader's runs" \
	"$(shardfs-plan "$T/grow" --window 4 -o workers=2,shuffle=none)" \
	'{"window": 0, "samples": [0, 4], "per_reader": 2, "padding": 0, "dropped": 0, "readers": [{"rank": 0, "worker": 0, "bytes": 4, "runs": [["c1.jsonl", 0, 2]]}, {"rank": 0, "worker": 1, "bytes": 4, "runs": [["c1.jsonl", 2, 1], ["c2.jsonl", 0, 1]]}], "ended": false}'
touch "$T/grow/.shardfs-end"
expect_eq "plan --window: the end pads the last window from its own order" \
	"$(shardfs-plan "$T/grow" --window 4 -o workers=2,shuffle=none | tail -1)" \
	'{"window": 1, "samples": [4, 7], "per_reader": 2, "padding": 1, "dropped": 0, "readers": [{"rank": 0, "worker": 0, "bytes": 4, "runs": [["c2.jsonl", 1, 2]]}, {"rank": 0, "worker": 1, "bytes": 4, "runs": [["c2.jsonl", 3, 1], ["c2.jsonl", 1, 1]]}], "ended": true}'
expect_eq "plan --window never writes the source" "$(ls -A "$T/grow")" \
	"$(printf '.shardfs-end\nc1.jsonl\nc2.jsonl\nc3.jsonl.tmp')"
expect_run "plan --window: a window that is not a multiple" 2 \
	"shardfs-plan: window=5 is not a multiple of world/replicas x workers x batch = 2: use window=4 or window=6" \
	-- shardfs-plan "$T/grow" --window 5 -o workers=2
finish
