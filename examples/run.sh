#!/usr/bin/env bash
# run.sh BUILD TESTS: the seed jobs of examples/ on real mounts, in the
# environment of tests/python/requirements.txt (tests/python/venv.sh),
# each one's output compared exactly.  Every mount is unmounted by its
# path on exit.
set -uo pipefail
BUILD=$(cd "$1" && pwd)
TESTS=$(cd "$2" && pwd)
EX=$TESTS/../examples
T=$(mktemp -d /tmp/shardfs-examples-XXXXXX)
mounted=()
cleanup() {
	local m
	for m in "${mounted[@]}"; do
		fusermount3 -u "$m" 2>/dev/null || umount -l "$m"
	done
	rm -rf --one-file-system "$T"
}
trap cleanup EXIT
venv=$(bash "$TESTS/python/venv.sh" "$TESTS/python/requirements.txt") || exit 2
PY=$venv/bin/python
export PATH="$BUILD:$PATH" PYTHONPATH=$EX/../python
failed=0
passed=0
# mount SRC MNT OPTS: the daemon in the background, until MNT is a mount
mount_view() {
	mkdir -p "$2"
	shardfs "$1" "$2" -o "$3" 2>>"$T/daemon.log" || return 1
	mounted+=("$2")
}
# expect NAME GOT WANT
expect() {
	if [ "$2" = "$3" ]; then
		echo "ok: $1"
		passed=$((passed + 1))
	else
		printf 'FAIL: %s\n--- got\n%s\n--- want\n%s\n' "$1" "$2" "$3"
		failed=$((failed + 1))
	fi
}

# Lance read with SafeLanceDataset in DDP: 4 fragments of 37, 50, 61 and
# 23 rows (171), world=2, batch=8: 88 rows a rank (5 of padding), 11 steps
"$PY" - "$T/lance/train.lance" <<'PY' || exit 2
import sys, lance, pyarrow as pa
first = 0
for i, n in enumerate((37, 50, 61, 23)):
    lance.write_dataset(pa.table({
        "key": ["row%04d" % k for k in range(first, first + n)],
        "x": [float(k) for k in range(first, first + n)]}),
        sys.argv[1], mode="append" if i else "create")
    first += n
PY
shardfs-index "$T/lance/train.lance" --quiet || exit 2
mount_view "$T/lance/train.lance" "$T/mnt-lance" world=2,workers=1,batch=8 ||
	exit 2
got=$(timeout 600 "$PY" "$EX/lance_ddp.py" "$T/mnt-lance" train.lance 2>"$T/err")
rc=$?
[ $rc -eq 0 ] || cat "$T/err" >&2
expect "lance_ddp.py: equal steps, full batches, every row read" "$rc
$got" "0
rank 0: 11 steps, 88 rows
rank 1: 11 steps, 88 rows
distinct rows: 171"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
