#!/usr/bin/env bash
# Mixtures and epoch_size in shardfs-plan and shardfs-check plan: the plan
# grid against the independent Python reference of docs/plan.md, the
# allocation rules, what epochs take of a source over time, and every bad
# mixture file refused with the file, the field and the fix.
. "$(dirname "$0")/../lib.sh"

shardfs-mkdata "$T/web" --format jsonl --shards 6 --samples 20-60 --seed 11 >/dev/null
shardfs-mkdata "$T/code" --format tar --shards 4 --samples 5-25 --size 1-64 --seed 12 >/dev/null
mkdir -p "$T/sub"
shardfs-mkdata "$T/sub/math" --format tfrecord --shards 3 --samples 3-9 --seed 13 >/dev/null
shardfs-mkdata "$T/books" --format jsonl --shards 2 --samples 40 --seed 14 >/dev/null
for s in web code sub/math books; do shardfs-index "$T/$s" --quiet --no-hash; done
shardfs-index "$T/books" --quiet --no-hash --out "$T/books-index"
samples() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["samples"])' "$1/.shardfs/manifest.json"; }
n_web=$(samples "$T/web") n_code=$(samples "$T/code") n_math=$(samples "$T/sub/math")

mix() { # NAME JSON: a mixture file in $T
	printf '%s\n' "$2" > "$T/$1.json"
}
mix prop '{"sources": [{"path": "web", "proportion": 3}, {"path": "code", "proportion": 1},
  {"path": "sub/math", "proportion": 0.5}], "epoch_size": 300}'
mix strat '{"sources": [{"path": "web", "proportion": 0.7}, {"path": "code", "proportion": 0.2, "name": "kode"},
  {"path": "sub/math", "proportion": 0.1}], "batching": "stratified", "epoch_size": 400}'
mix rep '{"sources": [{"path": "web", "repeat": 0.5}, {"path": "code", "repeat": 2.5},
  {"path": "sub/math", "repeat": 3}, {"path": "books", "repeat": 1, "index": "books-index"}]}'
mix fixed '{"sources": [{"path": "web", "repeat": 0.25}, {"path": "code", "repeat": 1.5}], "sampling": "fixed"}'
mix choose '{"sources": [{"path": "web", "choose": 50}, {"path": "sub/math", "choose": 70}], "batching": "stratified"}'
mix one '{"sources": [{"path": "web", "proportion": 1}], "epoch_size": 100}'

# --- the plan grid against the reference ---
for m in prop strat rep fixed choose one; do
	for o in "world=1" "world=4,workers=2,block=5" "world=3,workers=3,epoch=5,seed=77" \
		"world=2,workers=2,shuffle=samples,block=7,epoch=2" \
		"world=5,remainder=drop,batch=4,start=31,block=4" \
		"world=2,workers=4,shuffle=none,block=3,start=2,batch=2" \
		"world=3,workers=2,batch=4,partition=interleaved,epoch=1,block=6" \
		"world=4,workers=2,replicas=2,shuffle=samples,batch=3,block=5,epoch=7" \
		"world=2,epoch_size=1000,block=8,epoch=3"; do
		expect_reference "$T/$m.json" "$T/$m.json" "$o"
	done
done
for o in "world=2,epoch_size=50" "world=3,workers=2,epoch_size=5000,epoch=9,block=10" \
	"world=2,epoch_size=77,shuffle=samples,block=6,epoch=4"; do
	expect_reference "$T/web" "$T/web/.shardfs/manifest.json" "$o"
done

# --- allocations: largest remainder, stated exactly ---
alloc() { # MIXTURE OPTIONS: name=allocated ... from plan.json
	shardfs-plan "$T/$1.json" -o "$2" --json | python3 -c '
import json, sys
print(" ".join("%s=%d" % (s["name"], s["allocated"])
               for s in json.load(sys.stdin)["mixture"]["sources"]))'
}
# 300 x 3/4.5 = 200, x 1/4.5 = 66.67, x 0.5/4.5 = 33.33: the remainder goes to code
expect_eq "proportion: largest remainder" "$(alloc prop world=1)" "web=200 code=67 math=33"
expect_eq "epoch_size= overrides the file" "$(alloc prop world=1,epoch_size=10)" "web=7 code=2 math=1"
books=$(samples "$T/books")
expect_eq "repeat: round(factor x samples)" "$(alloc rep world=1)" \
	"web=$(( (n_web + 1) / 2 )) code=$(( (n_code * 5 + 1) / 2 )) math=$((n_math * 3)) books=$books"
expect_eq "choose: samples per epoch" "$(alloc choose world=1)" "web=50 math=70"
expect_eq "proportion without epoch_size: the sources' sum" \
	"$(alloc prop world=1,epoch_size=0 | tr ' ' '\n' | cut -d= -f2 | paste -sd+ | bc)" "300"

# --- what the epochs of a source take ---
# epoch_size below the source: each epoch continues where the last stopped,
# so ceil(n / size) epochs see every sample, none twice before all once
reads() { # SRC OPTIONS EPOCH...: the samples of those epochs, one per line
	local src=$1 o=$2 e
	shift 2
	for e in "$@"; do
		shardfs-plan "$src" -o "$o,epoch=$e" --json > "$T/reads.json" || return
		python3 -c '
import json, sys
for r in json.load(sys.stdin)["readers"]:
    for f in r["files"]:
        for a, c in f["runs"]:
            for k in range(c):
                print("%s:%d" % (f["shard"], a + k))' < "$T/reads.json"
	done
}
size=$(( (n_web + 2) / 3 ))
got=$(reads "$T/web" "epoch_size=$size,block=4" 0 1 2 | head -n "$n_web" | sort | uniq | wc -l)
expect_eq "balanced: 3 epochs of a third see every sample" "$got" "$n_web"
got=$(reads "$T/web" "epoch_size=$((2 * n_web + 7)),block=5,shuffle=samples" 0 | sort | uniq -c | awk '{print $1}' | sort -u | tr '\n' ' ')
expect_eq "up-sampling 2x + 7: each sample 2 or 3 times" "$got" "2 3 "
got=$(reads "$T/web" "epoch_size=$((2 * n_web + 7)),block=5" 0 | head -n "$n_web" | sort -u | wc -l)
expect_eq "up-sampling: the first pass holds every sample once" "$got" "$n_web"
a=$(reads "$T/fixed.json" "block=4" 0 | sort | md5sum)
b=$(reads "$T/fixed.json" "block=4" 6 | sort | md5sum)
expect_eq "fixed: every epoch takes the same samples" "$a" "$b"
a=$(reads "$T/rep.json" "block=4" 0 | grep '^web/' | sort | md5sum)
b=$(reads "$T/rep.json" "block=4" 1 | grep '^web/' | sort | md5sum)
[ "$a" != "$b" ] && ok || bad "balanced: a down-sampled source takes other samples next epoch"
[ "$(reads "$T/rep.json" "block=4" 0 | sort | md5sum)" != "$(reads "$T/rep.json" "block=4" 1 | sort | md5sum)" ] && ok ||
	bad "reads: epochs differ"

# the order of an epoch is the same for any world and workers
order() { # MIXTURE OPTIONS: samples in reader order, padding cut off
	shardfs-plan "$T/$1.json" -o "$2" --json | python3 -c '
import json, sys
p = json.load(sys.stdin)
out = [(f["shard"], a + k) for r in p["readers"] for f in r["files"]
       for a, c in f["runs"] for k in range(c)]
print(out[:p["remaining"]])' | md5sum
}
for m in prop strat; do
	expect_eq "$m: world and workers do not change the order" \
		"$(order $m world=1,block=3,epoch=2)" "$(order $m world=3,workers=2,block=3,epoch=2,remainder=pad)"
done

# stratified: in any L positions in a row, each source has its share
# L x a / N rounded down or up, with two sources; within 2 of it with more
window() { # MIXTURE L: per source, the counts seen in windows of L
	shardfs-plan "$T/$1.json" -o world=1,block=2 --json | python3 -c '
import json, sys
p, L = json.load(sys.stdin), int(sys.argv[1])
src = [f["shard"].split("/")[0] for r in p["readers"] for f in r["files"]
       for a, c in f["runs"] for k in range(c)]
seen = {}
for i in range(len(src) - L + 1):
    for s in set(src):
        seen.setdefault(s, set()).add(src[i:i + L].count(s))
print(" ".join("%s=%s" % (s, sorted(c)) for s, c in sorted(seen.items())))' "$2"
}
mix strat2 '{"sources": [{"path": "web", "proportion": 0.7}, {"path": "code", "proportion": 0.3}],
  "batching": "stratified", "epoch_size": 300}'
expect_eq "stratified, 2 sources: windows of 7 hold 4.9 and 2.1 rounded" \
	"$(window strat2 7)" "code=[2, 3] web=[4, 5]"
expect_eq "stratified, 2 sources: windows of 10 hold 7 and 3" \
	"$(window strat2 10)" "code=[3] web=[7]"
expect_eq "stratified, 3 sources: windows of 7 hold 4.9, 1.4, 0.7 within 2" \
	"$(window strat 7)" "code=[1, 2] sub=[0, 1] web=[4, 5, 6]"
expect_eq "stratified, 3 sources: windows of 20 hold 14, 4, 2 within 2" \
	"$(window strat 20)" "code=[4] sub=[2] web=[14]"

# views name the source; the summary counts per source
out=$(shardfs-check plan "$T/prop.json" -o world=4,workers=2,replicas=2,block=5)
expect_eq "check plan: per-source reads (replicas=2 reads twice)" \
	"$(echo "$out" | grep '^sources:')" "sources: web 400 of 400, code 134 of 134, math 66 of 66"
expect_eq "check plan passes" "$(echo "$out" | tail -1)" "PASS: disjoint, nothing missing, equal counts"

# --- bad mixtures: the file, the field, the fix ---
bad_mix() { # NAME JSON MESSAGE
	printf '%s\n' "$2" > "$T/bad.json"
	expect_run "$1" 2 "shardfs-plan: $3" -- shardfs-plan "$T/bad.json"
}
bad_mix "not JSON" '{"sources": [' \
	"$T/bad.json: not a directory nor a JSON mixture file: line 2, column 0: ']' expected near end of file; a source is an indexed directory or a mixture file (docs/plan.md)"
bad_mix "unknown key" '{"sources": [{"path": "web", "proportion": 1}], "epoch_sise": 5}' \
	"$T/bad.json: unknown key \"epoch_sise\"; a mixture has sources, epoch_size, sampling and batching"
bad_mix "unknown source key" '{"sources": [{"path": "web", "weight": 1}]}' \
	"$T/bad.json: sources[0].weight is not a key of a source; a source has path, name, index and one of proportion, repeat or choose"
bad_mix "no sources" '{"sources": []}' \
	"$T/bad.json: sources is missing, empty or not a list; list 1 to 1024 sources: [{\"path\": \"/data/x\", \"proportion\": 1}, ...]"
bad_mix "missing source" '{"sources": [{"path": "nowhere", "proportion": 1}]}' \
	"$T/bad.json: sources[0].path nowhere: No such file or directory; name an indexed directory"
mkdir -p "$T/raw"
bad_mix "unindexed source" '{"sources": [{"path": "raw", "proportion": 1}]}' \
	"$T/bad.json: source \"raw\": $T/raw/.shardfs/manifest.json: no index; build it with: shardfs-index $T/raw"
bad_mix "no weight" '{"sources": [{"path": "web"}]}' \
	"$T/bad.json: sources[0].proportion is missing; give each source exactly one of proportion, repeat or choose"
bad_mix "two weights" '{"sources": [{"path": "web", "proportion": 1, "choose": 4}]}' \
	"$T/bad.json: sources[0].proportion is given with another weight; give each source exactly one of proportion, repeat or choose"
bad_mix "weights of two kinds" '{"sources": [{"path": "web", "proportion": 1}, {"path": "code", "repeat": 2}]}' \
	"$T/bad.json: sources[1].repeat is given where sources[0] has proportion; every source of a mixture takes the same kind of weight"
bad_mix "proportion 0" '{"sources": [{"path": "web", "proportion": 0}]}' \
	"$T/bad.json: sources[0].proportion is not a number in (0, 1e9]; a proportion is a relative weight, e.g. 3 and 1, or 0.75 and 0.25"
bad_mix "negative repeat" '{"sources": [{"path": "web", "repeat": -1}]}' \
	"$T/bad.json: sources[0].repeat is not a number in (0, 1e6]; repeat is a factor: 0.5 takes half the source per epoch, 2 takes it twice"
bad_mix "choose 0" '{"sources": [{"path": "web", "choose": 0}]}' \
	"$T/bad.json: sources[0].choose is not a whole number >= 1; choose is how many samples of this source an epoch takes"
bad_mix "epoch_size 0" '{"sources": [{"path": "web", "proportion": 1}], "epoch_size": 0}' \
	"$T/bad.json: epoch_size is not a whole number >= 1; give the samples of an epoch, or leave epoch_size out"
bad_mix "duplicate path" '{"sources": [{"path": "web", "proportion": 1}, {"path": "./web", "proportion": 1, "name": "w2"}]}' \
	"$T/bad.json: sources[0] and sources[1] are both $T/web; list a source once (repeat=2 takes it twice)"
bad_mix "duplicate name" '{"sources": [{"path": "web", "proportion": 1}, {"path": "code", "proportion": 1, "name": "web"}]}' \
	"$T/bad.json: sources[0] and sources[1] are both named \"web\"; give one of them another \"name\""
bad_mix "bad name" '{"sources": [{"path": "web", "proportion": 1, "name": "a/b"}]}' \
	"$T/bad.json: sources[0].name has characters a file name may not hold; give \"name\": up to 64 letters, digits, '.', '_' and '-'"
bad_mix "overlap" '{"sources": [{"path": ".", "proportion": 1, "name": "all"}, {"path": "web", "proportion": 1}]}' \
	"$T/bad.json: sources[0] ($T) and sources[1] ($T/web) overlap: one is inside the other; give sources that hold different shards"
bad_mix "bad sampling" '{"sources": [{"path": "web", "proportion": 1}], "sampling": "uniform"}' \
	"$T/bad.json: sampling must be \"balanced\" or \"fixed\", not \"uniform\""
bad_mix "too many passes" '{"sources": [{"path": "sub/math", "repeat": 100000}]}' \
	"$T/bad.json: the epoch takes $((n_math * 100000)) samples of source \"math\", which has $n_math: more than 65536 passes over it; lower its weight or epoch_size"
expect_run "index= with a mixture" 2 \
	"shardfs-plan: $T/prop.json: index= is for a source directory; a mixture names each source's index in its \"index\" field" \
	-- shardfs-plan "$T/prop.json" --index "$T/books-index"

# a changed shard names its source's rebuild command
echo '{"extra": 1}' >> "$T/books/shard-000001.jsonl"
size=$(stat -c %s "$T/books/shard-000001.jsonl")
expect_run "stale source of a mixture" 2 \
	"shardfs-plan: the index is stale: 1 shard file changed since it was built: books/shard-000001.jsonl (size $size, the index says $((size - 13))); rebuild it with: shardfs-index $T/books --out $T/books-index" \
	-- shardfs-plan "$T/rep.json"
finish
