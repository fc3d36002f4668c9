#!/usr/bin/env bash
# Lance datasets written by pylance (tests/lance/requirements.txt:
# fragments of 1 to 50 000 rows, appends, deletions of both kinds,
# strings, nulls, lists, fixed-size vectors) mounted for real: every
# reader directory holds one Lance dataset, named like the source, that
# lance.dataset() opens as exactly the reader's rows in plan order, under
# a grid of plan options (tests/lance/check_mount.py says what is
# checked); an epoch switch gives the next epoch's rows under new names;
# the recipe of docs/loaders.md runs through PyTorch's DataLoader and a
# DDP job on a mount; shardfs-check view refuses a Lance mount with a
# message.  Arguments: BUILD TESTS.
. "$(dirname "$0")/lib.sh"
venv=$(bash "$TESTS/python/venv.sh" "$TESTS/lance/requirements.txt") || {
	bad "install pylance"
	finish
	exit
}
py=$venv/bin/python
tvenv=$(bash "$TESTS/python/venv.sh" "$TESTS/lance/requirements-torch.txt") || {
	bad "install pylance beside Debian's torch"
	finish
	exit
}
tpy=$tvenv/bin/python

"$py" "$TESTS/lance/make_datasets.py" "$T/src" --big --rich > "$T/expected.json" ||
	{ bad "make_datasets.py"; finish; exit; }
for ds in frags big; do
	shardfs-index "$T/src/$ds.lance" --quiet || bad "$ds: shardfs-index"
done

# check DATASET OPTIONS [--copies]: mount, check every reader, unmount
check() {
	local m=$T/mnt got
	mount_view "$T/src/$1.lance" "$m" "$2" || { bad "$1: $2: mount"; return; }
	got=$("$py" "$TESTS/lance/check_mount.py" "$T/src/$1.lance" "$m" "$1.lance" ${3:-} 2>&1)
	expect_eq "$1: $2: every reader's dataset is its rows (and the union the source's)" \
		"$(grep -vc ': ok$' <<<"$got")" 0 || printf '%s\n' "$got" >&2
	unmount_view "$m"
}

for opts in world=2,workers=2 \
	world=2,workers=3,remainder=drop \
	world=3,workers=2,batch=7,start=100 \
	world=2,workers=2,block=50,shuffle=samples,seed=3,epoch=2 \
	world=4,workers=2,partition=interleaved,batch=4,block=100,shuffle=units,seed=5 \
	world=4,workers=1,replicas=2,block=300 \
	world=2,workers=2,epochs=3,epoch=8,block=100 \
	world=1,workers=1; do
	check frags "$opts"
done
check frags world=2,workers=2,block=200,shuffle=units,symlinks=0 --copies
check frags world=3,workers=1,block=100,symlinks=0,no_open=0,prefetch=0 --copies
for opts in world=3,workers=2 world=2,workers=4,block=5000,seed=9,remainder=drop \
	world=5,workers=1,partition=interleaved,batch=64,block=1000; do
	check big "$opts"
done

# an epoch switch: the next epoch's rows, under new names for new bytes
m=$T/mnt
if mount_view "$T/src/frags.lance" "$m" world=2,workers=2,block=100,seed=1; then
	d=$m/1/1/frags.lance
	before=$(cd "$d" && ls _versions _deletions | sort)
	echo 1 > "$m/.shardfs/epoch"
	after=$(cd "$d" && ls _versions _deletions | sort)
	got=$("$py" "$TESTS/lance/check_mount.py" "$T/src/frags.lance" "$m" frags.lance 2>&1)
	expect_eq "epoch 1: every reader's dataset is its rows" \
		"$(grep -vc ': ok$' <<<"$got")" 0 || printf '%s\n' "$got" >&2
	expect_eq "epoch 1: the manifest has a new name" \
		"$(comm -12 <(grep manifest <<<"$before") <(grep manifest <<<"$after"))" ""
	expect_eq "epoch 1: plan.json is epoch 1's" \
		"$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["options"]["epoch"])' "$m/.shardfs/plan.json")" 1
	# the loaders.md recipe, as written there, through PyTorch's DataLoader
	sed -n '/^# recipe: lance$/,/^```$/p' "$TESTS/../docs/loaders.md" | sed '$d' > "$T/recipe.py"
	expect_eq "the recipe is in docs/loaders.md" "$(grep -c 'lance.dataset' "$T/recipe.py")" 1
	got=$("$tpy" "$TESTS/lance/torch_recipe.py" "$T/recipe.py" "$m" "$T/src/frags.lance" frags.lance 2>&1)
	expect_eq "the recipe: every rank's rows, in order, equal steps" "$(tail -1 <<<"$got")" \
		"ok: 4 readers, $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["per_reader"])' "$m/.shardfs/plan.json") rows each" ||
		printf '%s\n' "$got" >&2
	got=$(shardfs-check view "$m" 2>&1)
	expect_eq "shardfs-check view refuses a Lance mount" "$?:$got" \
		"2:shardfs-check: $T/src/frags.lance: the source holds lance datasets ($(cd "$T/src/frags.lance" && ls _versions/*.manifest | head -1)), whose views the auditor cannot check yet: each reader's directory is a dataset of its own, not files of samples; read them with the dataset's library (docs/check.md)"
	unmount_view "$m"
fi

# a source holding two datasets and a JSONL file: each reader has one
# dataset directory per dataset it reads (named by its path), beside the
# JSONL slices, and its rows over all of them are per_reader
mkdir -p "$T/mixed/sub"
cp -r "$T/src/frags.lance" "$T/mixed/sub/"
cp -r "$T/src/stable.lance" "$T/mixed/"
rm -rf "$T"/mixed/*.lance/.shardfs "$T"/mixed/sub/*.lance/.shardfs
seq 0 99 | sed 's/.*/{"n": &}/' > "$T/mixed/lines.jsonl"
shardfs-index "$T/mixed" --quiet || bad "mixed: shardfs-index"
if mount_view "$T/mixed" "$m" world=2,workers=2,block=10,seed=2; then
	got=$("$py" -c '
import glob, json, os, sys
import lance
m = sys.argv[1]
per = json.load(open(m + "/.shardfs/plan.json"))["per_reader"]
for d in sorted(glob.glob(m + "/*/*")):
    n = sum(lance.dataset(x).count_rows() for x in glob.glob(d + "/*.lance"))
    n += sum(sum(1 for _ in open(f)) for f in glob.glob(d + "/*.jsonl"))
    names = sorted(os.path.basename(x) for x in glob.glob(d + "/*.lance"))
    print(d[len(m):], n == per, names)' "$m" 2>&1)
	expect_eq "mixed: every reader's rows over its datasets and lines are per_reader" \
		"$(grep -c ' True ' <<<"$got")" 4 || printf '%s\n' "$got" >&2
	expect_eq "mixed: datasets named by their paths" \
		"$(grep -o "'[^']*'" <<<"$got" | sort -u | tr '\n' ' ')" \
		"'stable.lance' 'sub%2Ffrags.lance' "
	unmount_view "$m"
fi

# a DDP job (gloo, 2 ranks sharing a mount, DataLoader num_workers=2)
# through the recipe, over two epochs: equal steps, full batches, every
# live row once plus the plan's padding (tests/lance/ddp_lance.py)
if mount_view "$T/src/frags.lance" "$m" world=2,workers=2,batch=8,block=100,seed=4; then
	mkdir -p "$T/ddp"
	got=$("$tpy" "$TESTS/lance/ddp_lance.py" "$T/recipe.py" "$m" "$T/src/frags.lance" \
		frags.lance 0,1 "$T/ddp" 2>&1)
	expect_eq "DDP over Lance views: equal steps, exact union" "$(tail -1 <<<"$got")" \
		"ok: 2 ranks, 2 epochs, 110 steps each, every live row once plus the padding" ||
		printf '%s\n' "$got" >&2
	unmount_view "$m"
fi

finish
