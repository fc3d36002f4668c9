#!/usr/bin/env bash
# shardfs-plan's output, byte for byte, against hashes of what it printed
# before the plan builder's memory was cut (main at 3948b0e): units, samples,
# none, blocks, pad and drop, start, batch, interleaved, replicas,
# epoch_size, compressed (unsliceable) shards and every kind of mixture, as
# JSON and as the summary, errors included.  A change here is a change of
# the plan contract (docs/plan.md), which every rank of a job relies on.
. "$(dirname "$0")/../lib.sh"

cd "$T" || exit 1
shardfs-mkdata tar --format tar --shards 11 --samples 1-60 --size 1-64 --seed 5 >/dev/null
shardfs-mkdata jsonl --format jsonl --shards 40 --samples 5-300 --seed 6 >/dev/null
shardfs-mkdata tfr --format tfrecord --shards 9 --samples 3-90 --seed 13 >/dev/null
shardfs-mkdata gz --format tar --shards 12 --samples 1-40 --size 1-64 --seed 8 >/dev/null
gzip -n gz/shard-000001.tar gz/shard-000003.tar gz/shard-000005.tar
shardfs-mkdata web --format jsonl --shards 6 --samples 20-60 --seed 11 >/dev/null
shardfs-mkdata code --format tar --shards 4 --samples 5-25 --size 1-64 --seed 12 >/dev/null
for s in tar jsonl tfr gz web code; do shardfs-index $s --quiet --no-hash; done
echo '{"sources": [{"path": "web", "proportion": 3}, {"path": "code", "proportion": 1}, {"path": "tfr", "proportion": 0.5}], "epoch_size": 300}' > prop.json
echo '{"sources": [{"path": "web", "proportion": 0.7}, {"path": "code", "proportion": 0.2}, {"path": "tfr", "proportion": 0.1}], "batching": "stratified", "epoch_size": 400}' > strat.json
echo '{"sources": [{"path": "web", "repeat": 0.5}, {"path": "code", "repeat": 2.5}, {"path": "tfr", "repeat": 3}]}' > rep.json
echo '{"sources": [{"path": "web", "repeat": 0.25}, {"path": "code", "repeat": 1.5}], "sampling": "fixed"}' > fixed.json
echo '{"sources": [{"path": "web", "choose": 50}, {"path": "tfr", "choose": 70}], "batching": "stratified"}' > choose.json

# plans SRC: every option set's plan of SRC, JSON and summary, with the
# exit status and the messages
plans() {
	local o
	for o in "${PLAN_OPTION_SETS[@]}" \
		"world=2,epoch_size=1000,block=8,epoch=3,shuffle=samples" \
		"world=3,epoch_size=17,epoch=4,block=2" \
		"world=2,workers=2,shuffle=samples,block=1000" \
		"world=1,shuffle=samples,seed=9,epoch=123456789" \
		"world=8,workers=2,rank=1,3-4,block=4,shuffle=samples"; do
		echo "== $o"
		shardfs-plan "$1" -o "$o" --json 2>&1
		echo "status $?"
		shardfs-plan "$1" -o "$o" 2>&1
		echo "status $?"
	done
}

while read -r src want; do
	got=$(plans "$src" | sed "s|$T|T|g" | sha256sum | cut -c1-64)
	expect_eq "the plans of $src are the same bytes" "$got" "$want"
done <<'HASHES'
tar 99d00ac08dd7f865987d93633380785396a5f242a9b14d55d01a86134a0b7729
jsonl b6484c298a04b7385ec15638c851d108e999b20d14b26eb82e42b62b5507a936
tfr 74039148b599e5554fd5125bc63b3032d8c3acbaf2193a090be6c619c27a7381
gz d5c87a83e8110bd149a37b9e721d6fc0d4540a3c65d00064903304272456683e
prop.json 36bd980ab8b03d3bc64e30d2a7a1a56509b3855bc1544c1e7226b19b8df62646
strat.json 8c984eff7b40d1457884af200ca08c8e6842759d3872050e3326a2c24dbc333b
rep.json e85e85deb25e63e2812028a9fe6d92c51ea62d459a8404f666d1d1d4e534d283
fixed.json c2d7405a6881df2b256e8d7f31c18373ae5eefe6d1ef4c4e7ab3d727443db035
choose.json 52825fb426b3b46e7ad5d08c5da0a555c5658c6a5c7f12c1ebc49ab1957cd142
HASHES
# the datasets are the same bytes too (else the hashes above could not match)
expect_eq "shardfs-mkdata made the same shards" \
	"$(cat tar/*.tar jsonl/* tfr/* gz/* web/* code/* | sha256sum | cut -c1-64)" \
	"9ee6ba46d8aacb30d640e4d32f56d757f53d224e7e21789e5c20e5ff20e2eb99"
finish
