#!/usr/bin/env bash
# Lance datasets written by pylance (tests/mount/lance/requirements.txt:
# fragments of 1 to 50 000 rows, appends, deletions of both kinds,
# strings, nulls, lists, fixed-size vectors) mounted for real: every
# reader directory holds one Lance dataset, named like the source, that
# lance.dataset() opens as exactly the reader's rows in plan order, under
# a grid of plan options (tests/mount/lance/check_mount.py says what is
# checked); an epoch switch gives the next epoch's rows under new names;
# the recipe of docs/loaders.md runs through PyTorch's DataLoader and a
# DDP job on a mount; shardfs-check view proves every Lance mount of the
# grid (every reader's rows are its plan's, its data files the source's)
# and fails, with its exact findings, on a copy of a view whose deletion
# file or data file was tampered with.  Arguments: BUILD TESTS.
. "$(dirname "$0")/../lib.sh"

# Who may read a reader's dataset with allow_other and symlinks=0 (run
# first: the fixture is enough, pylance is not needed).  A data file has
# its source file's owner, group and read bits, less what data/ keeps
# out; the manifest and the deletion files the meet of the source's
# manifest and every data file they describe, so that a user the source
# refuses a data file cannot read its rows, nor a manifest naming them.
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
# modes_of DIR: every file's "mode owner:group" below DIR, once each
modes_of() { find "$1" -type f -printf '%m %U:%G\n' | sort -u | tr '\n' ' '; }
P=$T/perm/frags.lance
mkdir -p "$T/perm"
cp -r "$TESTS/unit/fixtures/lance/frags.lance" "$T/perm/"
chmod -R go+rX "$T/perm"
chmod 755 "$T"
shardfs-index "$P" --quiet || bad "perm: shardfs-index"
m=$T/mnt
O=world=1,workers=1,symlinks=0,allow_other
d=$m/0/0/frags.lance
f=01000001110011011010101070480240c8999dc205b38d415b.lance
chmod 700 "$P/data"
chmod 600 "$P"/data/*
if mount_view "$P" "$m" "$O"; then
	expect_eq "perm: data/ 700, its files 600: the data files are 400 root's" \
		"$(modes_of "$d/data")" "400 0:0 "
	expect_eq "perm: the manifest and deletion files are 400 root's" \
		"$(modes_of "$d/_versions") $(modes_of "$d/_deletions")" \
		"400 0:0  400 0:0 "
	expect_run "perm: another user cannot read a data file" 1 \
		"cat: $d/data/$f: Permission denied" -- as_nobody cat "$d/data/$f"
	man=$(ls "$d/_versions")
	expect_run "perm: nor the manifest that describes it" 1 \
		"cat: $d/_versions/$man: Permission denied" -- \
		as_nobody cat "$d/_versions/$man"
	unmount_view "$m"
fi
# a 644 file in a 700 directory: kept out all the same
chmod 644 "$P"/data/*
if mount_view "$P" "$m" "$O"; then
	expect_eq "perm: 644 files in a 700 data/ are 400" \
		"$(modes_of "$d/data")" "400 0:0 "
	unmount_view "$m"
fi
# data/ open again: everyone reads; one data file of another owner, 640:
# it keeps its owner, and the manifest is the meet (root's, 440)
chmod 755 "$P/data"
chown 65534:0 "$P/data/$f"
chmod 640 "$P/data/$f"
if mount_view "$P" "$m" "$O"; then
	expect_eq "perm: the data files: one 440 of uid 65534, the rest 444 root's" \
		"$(modes_of "$d/data")" "440 65534:0 444 0:0 "
	expect_eq "perm: the manifest and deletion files are the meet: 040 root's" \
		"$(modes_of "$d/_versions") $(modes_of "$d/_deletions")" \
		"40 0:0  40 0:0 "
	expect_eq "perm: its owner reads that data file" \
		"$(as_nobody cat "$d/data/$f" | cmp - "$P/data/$f" && echo same)" same
	expect_run "perm: but not the manifest (group root's members only)" 1 \
		"cat: $d/_versions/$man: Permission denied" -- \
		as_nobody cat "$d/_versions/$man"
	unmount_view "$m"
fi
chown 0:0 "$P/data/$f"
chmod 644 "$P/data/$f"
if mount_view "$P" "$m" "$O"; then
	expect_eq "perm: all 644 in 755: every file 444" \
		"$(modes_of "$d")" "444 0:0 "
	expect_eq "perm: another user reads the manifest" \
		"$(as_nobody cat "$d/_versions/$man" | cmp - "$d/_versions/$man" && echo same)" same
	unmount_view "$m"
fi

venv=$(bash "$TESTS/python/venv.sh" "$TESTS/mount/lance/requirements.txt") || {
	bad "install pylance"
	finish
	exit
}
py=$venv/bin/python
# the PyTorch recipe and the DDP job: in the Python suites' environment
# (pylance 14.0.2 with the pinned torch 2, tests/python/requirements.txt;
# cached, built once)
tvenv=$(bash "$TESTS/python/venv.sh" "$TESTS/python/requirements.txt") || {
	bad "install tests/python/requirements.txt (pylance with torch 2)"
	finish
	exit
}
tpy=$tvenv/bin/python

"$py" "$TESTS/mount/lance/make_datasets.py" "$T/src" --big --rich > "$T/expected.json" ||
	{ bad "make_datasets.py"; finish; exit; }
for ds in frags big; do
	shardfs-index "$T/src/$ds.lance" --quiet || bad "$ds: shardfs-index"
done

# check DATASET OPTIONS [--copies]: mount, check every reader, unmount
check() {
	local m=$T/mnt got
	mount_view "$T/src/$1.lance" "$m" "$2" || { bad "$1: $2: mount"; return; }
	got=$("$py" "$TESTS/mount/lance/check_mount.py" "$T/src/$1.lance" "$m" "$1.lance" ${3:-} 2>&1)
	expect_eq "$1: $2: every reader's dataset is its rows (and the union the source's)" \
		"$(grep -vc ': ok$' <<<"$got")" 0 || printf '%s\n' "$got" >&2
	# the auditor checks one epoch per mount (epochs=1)
	if [[ $2 != *epochs=* ]]; then
		got=$(shardfs-check view ${CHECK_FLAGS:-} "$m" 2>&1)
		expect_eq "$1: $2: shardfs-check view passes" "$?:$(tail -1 <<<"$got")" \
			"0:PASS: disjoint, nothing missing, equal counts, every sample's bytes and order as planned" ||
			printf '%s\n' "$got" >&2
	fi
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
CHECK_FLAGS=--verify check frags world=2,workers=2,block=200,shuffle=units,symlinks=0 --copies
check frags world=3,workers=1,block=100,symlinks=0,no_open=0,prefetch=0 --copies
for opts in world=3,workers=2 world=2,workers=4,block=5000,seed=9,remainder=drop \
	world=5,workers=1,partition=interleaved,batch=64,block=1000; do
	check big "$opts"
done

# a fragment of 1.2 million rows: a reader's bitmap deleting most of it
# would take over 64 KiB without run containers, so it has them (cookie
# 12347), and pylance reads every reader's dataset as its rows
"$py" -c 'import sys, lance, pyarrow as pa
lance.write_dataset(pa.table({"id": pa.array(range(1200000), pa.int32())}),
                    sys.argv[1], max_rows_per_file=2000000)' "$T/src/huge.lance" ||
	bad "write huge.lance"
shardfs-index "$T/src/huge.lance" --quiet || bad "huge: shardfs-index"
check huge world=2,workers=2
if mount_view "$T/src/huge.lance" "$T/mnt" world=2,workers=2; then
	expect_eq "huge: a reader's bitmap has run containers" \
		"$(od -An -tu2 -N2 "$T"/mnt/1/0/huge.lance/_deletions/*.bin | tr -d ' ')" 12347
	unmount_view "$T/mnt"
fi

# an epoch switch: the next epoch's rows, under new names for new bytes
m=$T/mnt
if mount_view "$T/src/frags.lance" "$m" world=2,workers=2,block=100,seed=1; then
	d=$m/1/1/frags.lance
	before=$(cd "$d" && ls _versions _deletions | sort)
	echo 1 > "$m/.shardfs/epoch"
	after=$(cd "$d" && ls _versions _deletions | sort)
	got=$("$py" "$TESTS/mount/lance/check_mount.py" "$T/src/frags.lance" "$m" frags.lance 2>&1)
	expect_eq "epoch 1: every reader's dataset is its rows" \
		"$(grep -vc ': ok$' <<<"$got")" 0 || printf '%s\n' "$got" >&2
	expect_eq "epoch 1: the manifest has a new name" \
		"$(comm -12 <(grep manifest <<<"$before") <(grep manifest <<<"$after"))" ""
	expect_eq "epoch 1: plan.json is epoch 1's" \
		"$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["options"]["epoch"])' "$m/.shardfs/plan.json")" 1
	# the loaders.md recipe, as written there, through PyTorch's DataLoader
	sed -n '/^# recipe: lance$/,/^```$/p' "$TESTS/../docs/loaders.md" | sed '$d' > "$T/recipe.py"
	expect_eq "the recipe is in docs/loaders.md" "$(grep -c 'lance.dataset' "$T/recipe.py")" 1
	got=$("$tpy" "$TESTS/mount/lance/torch_recipe.py" "$T/recipe.py" "$m" "$T/src/frags.lance" frags.lance 2>&1)
	expect_eq "the recipe: every rank's rows, in order, equal steps" "$(tail -1 <<<"$got")" \
		"ok: 4 readers, $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["per_reader"])' "$m/.shardfs/plan.json") rows each" ||
		printf '%s\n' "$got" >&2
	got=$(shardfs-check view "$m" 2>&1)
	expect_eq "shardfs-check view of epoch 1 passes" "$?:$(tail -1 <<<"$got")" \
		"0:PASS: disjoint, nothing missing, equal counts, every sample's bytes and order as planned"
	unmount_view "$m"
fi

# shardfs-check view against tampered views: copies of a mount of the
# fixture dataset (tests/unit/fixtures/lance, fixed names and rows) with one
# reader's deletion file changed (still valid, as many rows deleted, one
# other row live), a data file's symlink pointing elsewhere, a status
# whose plan is not the one served; each fails with its exact findings
mkdir -p "$T/fx" "$T/elsewhere"
cp -r "$TESTS/unit/fixtures/lance/frags.lance" "$T/fx/"
shardfs-index "$T/fx/frags.lance" --quiet || bad "fixture: shardfs-index"
if mount_view "$T/fx/frags.lance" "$m" world=2,workers=2; then
	for c in good deletion link plan; do cp -a "$m" "$T/copy-$c"; done
	unmount_view "$m"
	fx=$T/fx/frags.lance
	man=_versions/18446744073709551608.manifest
	pass="view: 4 of 4 readers, 433 samples each (1732 remaining, 0 padded, 0 dropped)
PASS: disjoint, nothing missing, equal counts, every sample's bytes and order as planned"
	got=$(shardfs-check view "$T/copy-good" 2>&1)
	expect_eq "a copy of a view passes" "$?:$got" "0:$pass"
	expect_eq "tamper: a deletion file's rows move" \
		"$(python3 "$TESTS/mount/lance/tamper_deletion.py" "$T"/copy-deletion/1/0/frags.lance/_deletions/*.bin)" \
		"row 133 live, row 134 deleted"
	got=$(shardfs-check view "$T/copy-deletion" 2>&1)
	expect_eq "a changed deletion file: a row of another reader read, a row missing" "$?:$got" \
		"1:view: 4 of 4 readers, 433 samples each (1732 remaining, 0 padded, 0 dropped)
FAIL: 3 findings: 1 bytes 1 overlap 1 missing
  bytes: rank 1 worker 0 ($T/copy-deletion), frags.lance, fragment 0, sample 0: read $man:865, the plan says $man:866
  overlap: $man:865 is read 2 times (rank 0 worker 1 on $T/copy-deletion, rank 1 worker 0 on $T/copy-deletion), the plan reads it 1 time
  missing: $man:866 is read 0 times, the plan reads it 1 (rank 1 worker 0 should)"
	f=01000001110011011010101070480240c8999dc205b38d415b.lance
	cp "$fx/data/$f" "$T/elsewhere/"
	ln -sfn "$T/elsewhere/$f" "$T/copy-link/1/1/frags.lance/data/$f"
	got=$(shardfs-check view "$T/copy-link" 2>&1)
	expect_eq "a data file that is not the source's" "$?:$got" \
		"1:view: 4 of 4 readers, 433 samples each (1732 remaining, 0 padded, 0 dropped)
FAIL: 1 finding: 1 bytes
  bytes: rank 1 worker 1: frags.lance/data/$f is a symlink to $T/elsewhere/$f, not to the source's $fx/data/$f"
	sed -i 's/"start": 0,/"start": 433,/' "$T/copy-plan/.shardfs/status"
	got=$(shardfs-check view "$T/copy-plan" 2>&1)
	expect_eq "a view of another plan than its status says" "$?:$(sed -n 2,4p <<<"$got")" \
		"1:FAIL: 442 findings: 4 count 4 bytes 433 overlap 1 missing
  count: rank 0 worker 0 ($T/copy-plan) read 433 samples, the plan gives every reader 325
  bytes: rank 0 worker 0 ($T/copy-plan), frags.lance, fragment 0, sample 0: read $man:0, the plan says $man:433"
fi

# one mount per rank, as on two nodes: each emits its report, and the
# merged reports are judged as one audit
for r in 0 1; do
	mount_view "$T/src/frags.lance" "$T/rank$r" world=2,workers=2,rank=$r,block=100,seed=3 ||
		bad "rank $r: mount"
	shardfs-check view --emit "$T/report-$r.json" "$T/rank$r" >/dev/null ||
		bad "rank $r: --emit"
done
got=$(shardfs-check merge "$T/report-0.json" "$T/report-1.json" 2>&1)
expect_eq "the reports of two ranks' Lance mounts merge into a pass" "$?:$(tail -1 <<<"$got")" \
	"0:PASS: disjoint, nothing missing, equal counts, every sample's bytes and order as planned"
got=$(shardfs-check merge "$T/report-0.json" 2>&1)
expect_eq "rank 0's report alone: rank 1 is missing" "$?:$(sed -n 3p <<<"$got")" \
	"1:  coverage: rank 1 is shown by no mount"
for r in 0 1; do unmount_view "$T/rank$r"; done

# with symlinks=0 the data files are the mount's: --verify hashes them
if mount_view "$T/fx/frags.lance" "$m" world=2,workers=2,symlinks=0; then
	cp -a "$m" "$T/copy-bytes"
	unmount_view "$m"
	f=01000001110011011010101070480240c8999dc205b38d415b.lance
	printf 'X' | dd of="$T/copy-bytes/1/1/frags.lance/data/$f" bs=1 seek=100 conv=notrunc status=none
	got=$(shardfs-check view "$T/copy-bytes" 2>&1)
	expect_eq "a data file of the source's size passes without --verify" "$?:$got" "0:$pass"
	got=$(shardfs-check view --verify "$T/copy-bytes" 2>&1)
	expect_eq "--verify: a data file whose bytes are not the source's" "$?:$(sed -n 2,3p <<<"$got")" \
		"1:FAIL: 1 finding: 1 bytes
  bytes: rank 1 worker 1: frags.lance/data/$f: its bytes are not the source's $fx/data/$f (SHA-256)"
fi

# shardfs-index --dataset-version 3: the mount serves version 3 (738
# live rows), which the auditor proves and pylance reads
shardfs-index "$T/fx/frags.lance" --dataset-version 3 --quiet || bad "fixture: --dataset-version 3"
if mount_view "$T/fx/frags.lance" "$m" world=2,workers=2; then
	got=$(shardfs-check view "$m" 2>&1)
	expect_eq "version 3 mounted: shardfs-check view passes" "$?:$got" \
		"0:view: 4 of 4 readers, 185 samples each (738 remaining, 2 padded, 0 dropped)
PASS: disjoint, nothing missing, equal counts, every sample's bytes and order as planned"
	expect_eq "version 3: pylance reads 185 rows in each reader's dataset" \
		"$("$py" -c 'import glob, sys, lance; print(sorted({lance.dataset(d).count_rows() for d in glob.glob(sys.argv[1] + "/*/*/frags.lance")}))' "$m")" \
		"[185]"
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

# an index without digests (--no-hash): the auditor digests the source's
# rows itself (the driver's scan) and still proves the view
shardfs-index "$T/fx/frags.lance" --no-hash --out "$T/nohash" --quiet || bad "--no-hash index"
if mount_view "$T/fx/frags.lance" "$m" index=$T/nohash,world=3,workers=1,block=100,symlinks=0; then
	got=$(shardfs-check view --verify "$m" 2>&1)
	expect_eq "an index without digests: shardfs-check view --verify passes" "$?:$got" \
		"0:view: 3 of 3 readers, 578 samples each (1732 remaining, 2 padded, 0 dropped)
PASS: disjoint, nothing missing, equal counts, every sample's bytes and order as planned"
	unmount_view "$m"
fi

# a mixture whose sources are Lance datasets (and one of Lance and JSONL):
# each reader holds one dataset per source it reads, named after the
# source (MNT/<r>/<w>/<source>.<dataset>), beside its JSONL slices;
# shardfs-check view proves it (every row once, each source's allocation,
# each dataset in the plan's order) and pylance counts per_reader rows
shardfs-index "$T/src/v1.lance" --quiet || bad "v1: shardfs-index"
mkdir -p "$T/src/lines"
seq 0 199 | sed 's/.*/{"n": &}/' > "$T/src/lines/l.jsonl"
shardfs-index "$T/src/lines" --quiet || bad "lines: shardfs-index"
printf '%s\n' '{"sources": [{"path": "frags.lance", "proportion": 3},
  {"path": "v1.lance", "proportion": 1}], "epoch_size": 400}' > "$T/src/mix.json"
printf '%s\n' '{"sources": [{"path": "frags.lance", "proportion": 1},
  {"path": "lines", "proportion": 1}], "epoch_size": 300}' > "$T/src/mix2.json"
for mo in mix.json:world=2,workers=2 mix.json:world=2,workers=2,block=10,seed=1 \
	mix.json:world=3,workers=1,block=50,shuffle=samples,seed=4 \
	mix2.json:world=2,workers=2,block=10,seed=2; do
	mix=${mo%%:*} opts=${mo#*:}
	mount_view "$T/src/$mix" "$m" "$opts" || { bad "$mo: mount"; continue; }
	got=$(shardfs-check view "$m" 2>&1)
	expect_eq "$mo: shardfs-check view passes" "$?:$(tail -1 <<<"$got")" \
		"0:PASS: disjoint, nothing missing, equal counts, every sample's bytes and order as planned" ||
		printf '%s\n' "$got" >&2
	got=$("$py" -c '
import glob, json, sys
import lance
m = sys.argv[1]
per = json.load(open(m + "/.shardfs/plan.json"))["per_reader"]
for d in sorted(glob.glob(m + "/[0-9]*/[0-9]*")):
    n = sum(lance.dataset(x).count_rows() for x in glob.glob(d + "/*.lance"))
    n += sum(sum(1 for _ in open(f)) for f in glob.glob(d + "/*.jsonl"))
    print(d[len(m):], n, per, "ok" if n == per else "WRONG")' "$m" 2>&1)
	expect_eq "$mo: pylance counts per_reader rows in every reader" \
		"$(grep -vc ' ok$' <<<"$got")" 0 || printf '%s\n' "$got" >&2
	unmount_view "$m"
done

# a DDP job (gloo, 2 ranks sharing a mount, DataLoader num_workers=2)
# through the recipe, over two epochs: equal steps, full batches, every
# live row once plus the plan's padding (tests/mount/lance/ddp_lance.py)
if mount_view "$T/src/frags.lance" "$m" world=2,workers=2,batch=8,block=100,seed=4; then
	mkdir -p "$T/ddp"
	got=$("$tpy" "$TESTS/mount/lance/ddp_lance.py" "$T/recipe.py" "$m" "$T/src/frags.lance" \
		frags.lance 0,1 "$T/ddp" 2>&1)
	expect_eq "DDP over Lance views: equal steps, exact union" "$(tail -1 <<<"$got")" \
		"ok: 2 ranks, 2 epochs, 110 steps each, every live row once plus the padding" ||
		printf '%s\n' "$got" >&2
	unmount_view "$m"
fi

finish
