#!/usr/bin/env bash
# LanceDB (@lancedb/lancedb from the npm registry, pinned by
# tests/mount/lance/lancedb/package-lock.json; it bundles its own Lance, 12.0.0
# in 0.39.0, while pylance 14.0.2 writes the datasets) opening readers'
# datasets of real mounts: connect() on every reader's directory lists
# one table, openTable() opens it, countRows() is per_reader, and its
# rows (id and key) are the source's rows the plan names, in plan order,
# their union the source's live rows plus exactly the padding, less
# exactly the drop (tests/mount/lance/lancedb/open.mjs says what is checked).
# Datasets of tests/mount/lance/make_datasets.py --rich: V2 and V1 version
# names, Arrow and Roaring deletion files, stable row ids; a grid of plan
# options; an epoch switch.  Arguments: BUILD TESTS.
. "$(dirname "$0")/../lib.sh"
venv=$(bash "$TESTS/python/venv.sh" "$TESTS/mount/lance/requirements.txt") || {
	bad "install pylance"
	finish
	exit
}
. "$TESTS/mount/lance/lancedb/npm.sh"
lancedb_npm "$T/js" || { bad "install @lancedb/lancedb"; finish; exit; }
"$venv/bin/python" "$TESTS/mount/lance/make_datasets.py" "$T/src" --rich > /dev/null ||
	{ bad "make_datasets.py"; finish; exit; }
for ds in frags v1 stable; do
	shardfs-index "$T/src/$ds.lance" --quiet || bad "$ds: shardfs-index"
done

# opened SRC MNT: open.mjs's verdict on every reader of MNT
opened() {
	local got
	got=$(node "$T/js/open.mjs" "$1" "$2" "$(basename "$1")" 2>&1)
	expect_eq "$(basename "$1"): $opts: LanceDB opens every reader's dataset as its rows" \
		"$(grep -vc ': ok$' <<<"$got")" 0 || printf '%s\n' "$got" >&2
	grep -c ': ok$' <<<"$got"
}

# check DATASET OPTIONS: mount, open every reader with LanceDB, unmount
check() {
	local m=$T/mnt n
	opts=$2
	mount_view "$T/src/$1.lance" "$m" "$2" || { bad "$1: $2: mount"; return; }
	n=$(opened "$T/src/$1.lance" "$m")
	# every reader (each replica rank's) and the union line
	expect_eq "$1: $2: lines checked" "$n" "$(python3 -c '
import json, sys
p = json.load(open(sys.argv[1]))
print(len(p["readers"]) * p["options"].get("replicas", 1) + 1)' "$m/.shardfs/plan.json")"
	unmount_view "$m"
}

for opts in world=2,workers=2 \
	world=2,workers=3,remainder=drop \
	world=3,workers=2,batch=7,start=100 \
	world=2,workers=2,block=50,shuffle=samples,seed=3,epoch=2 \
	world=4,workers=2,partition=interleaved,batch=4,block=100,shuffle=units,seed=5 \
	world=4,workers=1,replicas=2,block=300 \
	world=2,workers=2,block=200,shuffle=units,symlinks=0; do
	check frags "$opts"
done
check v1 world=2,workers=2,remainder=drop
check v1 world=3,workers=2,block=10,shuffle=samples
check stable world=2,workers=2

# an epoch switch: LanceDB opens the next epoch's datasets as their rows
m=$T/mnt
opts="world=2,workers=2,block=100,seed=1, epoch 1"
if mount_view "$T/src/frags.lance" "$m" world=2,workers=2,block=100,seed=1; then
	opened "$T/src/frags.lance" "$m" > /dev/null
	echo 1 > "$m/.shardfs/epoch"
	opened "$T/src/frags.lance" "$m" > /dev/null
	# and a wrong answer is caught: another dataset of the same name as
	# the source (v1's rows) makes every reader a mismatch
	mkdir -p "$T/other"
	cp -r "$T/src/v1.lance" "$T/other/frags.lance"
	got=$(node "$T/js/open.mjs" "$T/other/frags.lance" "$m" frags.lance 2>&1)
	expect_eq "another source: every reader and the union a mismatch" \
		"$(grep -c ': MISMATCH$' <<<"$got")" 5
	unmount_view "$m"
else
	bad "epoch switch: mount"
fi

finish
