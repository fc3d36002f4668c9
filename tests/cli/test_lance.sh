#!/usr/bin/env bash
# Lance datasets written by pylance (tests/mount/lance/requirements.txt) through
# shardfs-index and shardfs-plan: the index counts every dataset's live
# rows exactly as lance.dataset(p).count_rows(); the plan gives every
# reader its equal share of them; a refresh follows a new version;
# --dataset-version N indexes an older one (both naming schemes); a
# dataset with a file missing, or a damaged manifest, is refused with the
# file, the byte and the fix (mounts: tests/mount/test_lance.sh).
# Arguments: BUILD TESTS.
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
venv=$(bash "$TESTS/python/venv.sh" "$TESTS/mount/lance/requirements.txt") || exit 1
lance_py=$venv/bin/python

# rows PY_EXPR: evaluate with lance imported
rows() { "$lance_py" -c "import lance; print($1)"; }

# indexed DIR: the samples of the index of DIR, per shard "path=n"
indexed() {
	python3 -c '
import json, sys
m = json.load(open(sys.argv[1] + "/.shardfs/manifest.json"))
print(" ".join("%s=%d" % (s["path"], s["samples"]) for s in m["shards"]))' "$1"
}

# per_reader DIR OPTIONS: the samples of each reader, space-separated
per_reader() {
	shardfs-plan "$1" -o "$2" --json | python3 -c '
import json, sys
p = json.load(sys.stdin)
print(" ".join(str(r["samples"]) for r in p["readers"]))'
}

"$lance_py" "$TESTS/mount/lance/make_datasets.py" "$T/src" --big > "$T/expected.json" ||
	{ echo "FAIL: make_datasets.py"; exit 1; }

for ds in frags v1 stable big; do
	d=$T/src/$ds.lance
	want=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]]["rows"])' \
		"$T/expected.json" "$ds.lance")
	expect_eq "$ds: pylance count_rows" "$(rows "lance.dataset('$d').count_rows()")" "$want"
	shardfs-index "$d" --quiet || bad "$ds: shardfs-index"
	got=$(indexed "$d")
	expect_eq "$ds: one shard, the newest manifest, live rows" \
		"${got#_versions/*.manifest=}" "$want"
	name=$(ls "$d/_versions" | "$lance_py" -c '
import sys
names = [n for n in sys.stdin.read().split() if n.endswith(".manifest")]
v = lambda n: 2**64 - 1 - int(n[:-9]) if len(n) == 29 else int(n[:-9])
print(max(names, key=v))')
	expect_eq "$ds: the shard is the newest version" "${got%%=*}" "_versions/$name"
	for opts in world=2,workers=2 world=2,workers=2,remainder=drop \
		world=3,workers=5,block=100,shuffle=samples,epoch=3; do
		t=$( [[ $opts == world=3* ]] && echo 15 || echo 4)
		if [[ $opts == *drop* ]]; then c=$((want / t)); else c=$(((want + t - 1) / t)); fi
		expect_eq "$ds: $opts: every reader gets its share" \
			"$(per_reader "$d" "$opts")" "$(printf "$c%.0s " $(seq $t) | sed 's/ $//')"
	done
done

# data files of Lance's file format 2.0 (their footers say version 0.3)
# and 2.2, with a column all null (100 000 rows in a few hundred bytes: a
# file's size bounds no row count): their footers' row counts are read
# and agree with the manifest's, so they are indexed
for v in 2.0 2.2; do
	"$lance_py" -c 'import sys, lance, pyarrow as pa
lance.write_dataset(pa.table({"a": pa.nulls(100000, pa.int32())}), sys.argv[1],
                    data_storage_version=sys.argv[2])' "$T/fmt-$v.lance" "$v" ||
		bad "write a dataset of format $v"
	shardfs-index "$T/fmt-$v.lance" --quiet || bad "format $v: shardfs-index"
	got=$(indexed "$T/fmt-$v.lance")
	expect_eq "format $v: 100 000 rows indexed" "${got#*=}" 100000
done

# the plan covers every live row once: contiguous, world=2,workers=2
expect_eq "frags: the readers' runs tile the live rows" \
	"$(shardfs-plan "$T/src/frags.lance" -o world=2,workers=2 --json | python3 -c '
import json, sys
p = json.load(sys.stdin)
print([run for r in p["readers"] for f in r["files"] for run in f["runs"]])')" \
	"[[0, 433], [433, 433], [866, 433], [1299, 433]]"

# a source holding two datasets and a JSONL file: three shards
mkdir -p "$T/mixed/sub"
cp -r "$T/src/v1.lance" "$T/mixed/sub/"
cp -r "$T/src/stable.lance" "$T/mixed/"
rm -rf "$T"/mixed/*.lance/.shardfs "$T"/mixed/sub/*.lance/.shardfs
printf '{"a": 1}\n{"a": 2}\n' > "$T/mixed/lines.jsonl"
shardfs-index "$T/mixed" --quiet || bad "mixed: shardfs-index"
expect_eq "mixed: two datasets and a JSONL file" \
	"$(indexed "$T/mixed" | sed 's/_versions\/[0-9]*\.manifest/_versions\/M/g')" \
	"lines.jsonl=2 stable.lance/_versions/M=37 sub/v1.lance/_versions/M=69"

# a refresh follows a new version (an append); the old one is kept as it is
d=$T/src/v1.lance
old=$(indexed "$d")
"$lance_py" -c "
import lance, pyarrow as pa
lance.write_dataset(pa.table({'id': pa.array([900, 901], pa.int32()), 'key': ['a', 'b']}), '$d', mode='append')"
shardfs-index "$d" --quiet || bad "v1 append: shardfs-index"
expect_eq "v1 append: the new version's rows" "$(indexed "$d")" "_versions/4.manifest=71"
expect_eq "v1 append: pylance agrees" "$(rows "lance.dataset('$d').count_rows()")" 71
expect_eq "v1: the index was of version 3 before" "$old" "_versions/3.manifest=69"

# refusals: each names the file, the byte and the fix
b=$T/bad
cp -r "$T/src/frags.lance" "$b"
rm -rf "$b/.shardfs"
m=$(indexed "$T/src/frags.lance"); m=${m%%=*}
data=$("$lance_py" -c "
import lance
print(lance.dataset('$b').get_fragments()[3].metadata.files[0].path)")
mv "$b/data/$data" "$T/moved"
got=$(shardfs-index "$b" --quiet 2>&1)
expect_eq "missing data file: refused" "$(sed -E 's/byte [0-9]+/byte N/' <<<"$got")" \
	"shardfs-index: 1 shard could not be indexed: $m: byte N: fragment 3's data file data/$data is missing: the dataset is incomplete (copied in part, or cleaned up under this version); copy it whole, or index its newest version; fix or remove it, or run shardfs-index --skip-bad to index the rest"
mv "$T/moved" "$b/data/$data"
del=$(cd "$b" && ls _deletions/5-*.bin)
mv "$b/$del" "$T/moved"
got=$(shardfs-index "$b" --quiet 2>&1)
expect_eq "missing deletion file: refused" "$(sed -E 's/byte [0-9]+/byte N/' <<<"$got")" \
	"shardfs-index: 1 shard could not be indexed: $m: byte N: fragment 5's deletion file $del is missing: the dataset is incomplete (copied in part, or cleaned up under this version); copy it whole, or index its newest version; fix or remove it, or run shardfs-index --skip-bad to index the rest"
mv "$T/moved" "$b/$del"
# fragment 1's deletion file (4 rows) replaced by fragment 2's (1 row)
one=$(cd "$b" && ls _deletions/1-6-*.arrow)
cp "$b/$one" "$T/saved"
cp "$b"/_deletions/2-*.arrow "$b/$one"
got=$(shardfs-index "$b" --quiet 2>&1)
expect_eq "replaced deletion file: refused" "$(sed -E 's/byte [0-9]+/byte N/' <<<"$got")" \
	"shardfs-index: 1 shard could not be indexed: $m: byte N: fragment 1's deletion file $one marks 1 row deleted, the manifest says 4: one of them was replaced; copy the dataset again; fix or remove it, or run shardfs-index --skip-bad to index the rest"
cp "$T/saved" "$b/$one"
size=$(stat -c %s "$b/$m")
head -c $((size - 1)) "$b/$m" > "$T/cut" && cat "$T/cut" > "$b/$m"
got=$(shardfs-index "$b" --quiet 2>&1)
expect_eq "truncated manifest: refused" "$got" \
	"shardfs-index: 1 shard could not be indexed: $m: byte $((size - 5)): no \"LANC\" magic at the end: not a Lance manifest, or truncated; restore it from the dataset's writer; fix or remove it, or run shardfs-index --skip-bad to index the rest"

# --dataset-version N: each version of frags (V2 names) and of v1 (V1
# names) indexed counts what lance.dataset(d, version=N) counts; a version
# that does not exist is refused with those that do; a re-run without the
# option indexes the newest again
for ds in frags v1; do
	d=$T/src/$ds.lance
	nv=$(rows "len(lance.dataset('$d').versions())")
	for v in $(seq 1 "$nv"); do
		shardfs-index "$d" --dataset-version "$v" --out "$T/ix-$ds-$v" --quiet ||
			bad "$ds: --dataset-version $v"
		expect_eq "$ds: version $v: indexed as pylance counts it" \
			"$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1] + "/manifest.json"))["shards"][0]["samples"])' "$T/ix-$ds-$v")" \
			"$(rows "lance.dataset('$d', version=$v).count_rows()")"
	done
done
expect_eq "frags has 7 versions" "$(ls "$T"/ix-frags-* -d | wc -l)" 7
expect_run "a version that does not exist" 2 \
	"shardfs-index: _versions: the dataset has no version 8 (no 8.manifest, no 18446744073709551607.manifest); its versions are 1-7: index one of those (shardfs-index --dataset-version N), or leave the option out for the newest" \
	-- shardfs-index "$T/src/frags.lance" --dataset-version 8 --out "$T/ix-none" --quiet
nv=$(rows "len(lance.dataset('$T/src/v1.lance').versions())")
expect_eq "v1 has V1 names only" "$(ls "$T/src/v1.lance/_versions" | grep -c '^[0-9]\{20\}')" 0
expect_run "v1 names: a version that does not exist" 2 \
	"shardfs-index: _versions: the dataset has no version $((nv + 1)) (no $((nv + 1)).manifest, no $(python3 -c "print('%020d' % (2**64 - 1 - $nv - 1))").manifest); its versions are 1-$nv: index one of those (shardfs-index --dataset-version N), or leave the option out for the newest" \
	-- shardfs-index "$T/src/v1.lance" --dataset-version $((nv + 1)) --out "$T/ix-none" --quiet
mkdir -p "$T/nods" && echo '{}' > "$T/nods/a.jsonl"
expect_run "--dataset-version of a source without a dataset" 2 \
	"shardfs-index: --dataset-version 2: $T/nods holds no dataset (a Lance dataset is a directory holding _versions/); leave the option out, or index the dataset's directory" \
	-- shardfs-index "$T/nods" --dataset-version 2 --quiet
cp -r "$T/src/frags.lance" "$T/again.lance" && rm -rf "$T/again.lance/.shardfs"
shardfs-index "$T/again.lance" --dataset-version 3 --quiet
shardfs-index "$T/again.lance" --quiet
expect_eq "a re-run without --dataset-version indexes the newest" "$(indexed "$T/again.lance")" \
	"_versions/18446744073709551608.manifest=1732"

# readers' Lance datasets (sfs_lance_view_build, written by lance-view
# as files; the daemon serves the same) read by pylance as their rows
for ds in frags big stable; do
	# shuffle=samples makes a fragment a row: 12 000 a reader of big
	samples=shuffle=samples
	[ $ds = big ] && samples=shuffle=units
	for opts in world=2,workers=2 world=3,workers=5,block=100,$samples,epoch=3 \
		world=7,block=5000,epoch=1,seed=9,remainder=drop; do
		got=$(shardfs-plan "$T/src/$ds.lance" -o "$opts" --json |
			"$lance_py" "$TESTS/mount/lance/check_views.py" "$BUILD/tests/lance-view" \
				"$T/src/$ds.lance" "$T/views/$ds-$opts")
		expect_eq "$ds: $opts: pylance reads every reader's dataset as its rows" \
			"$(grep -vc ': ok$' <<<"$got")" 0
	done
done

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
