#!/usr/bin/env bash
# run.sh BUILD TESTS SUITE [PYTEST ARGS]: the pytest suite tests/python/SUITE
# (package: the shardfs package on real mounts; loaders: Parquet readers,
# WebDataset, DDP and Lightning jobs through it) in the virtual environment
# of requirements.txt (venv.sh: built once, then reused), with ./python
# installed for this run alone (pip --target, first on PYTHONPATH).  Every mount is made under a scratch directory that is
# removed on exit; anything still mounted there (a pytest killed by a
# timeout) is unmounted first, by its path.
set -uo pipefail
BUILD=$(cd "$1" && pwd)
TESTS=$(cd "$2" && pwd)
SUITE=$3
shift 3
T=$(mktemp -d /tmp/shardfs-py-XXXXXX)
cleanup() {
	local m
	# deepest first
	for m in $(awk -v t="$T" 'index($2, t) == 1 { print $2 }' /proc/mounts | sort -r); do
		fusermount3 -u "$m" 2>/dev/null || umount -l "$m"
	done
	rm -rf --one-file-system "$T"
}
trap cleanup EXIT
venv=$(bash "$TESTS/python/venv.sh" "$TESTS/python/requirements.txt") || exit 2
start=$(date +%s)
# the package from the tree, every run (no build isolation: offline),
# built from a copy so that the tree gets no build/ or egg-info, and
# installed into this run's own directory, first on the path: never into
# the shared environment, where two suites run at once by ctest -j would
# reinstall it over each other (seen: pip failing on the other's
# half-written metadata)
cp -r "$TESTS/../python" "$T/package"
"$venv/bin/pip" install -q --no-deps --no-build-isolation --target "$T/site" \
	"$T/package" >"$T/pip.log" 2>&1 || { cat "$T/pip.log" >&2; exit 2; }
export PATH="$BUILD:$PATH" SHARDFS_TESTS=$TESTS SHARDFS_TMP=$T \
	PYTHONPATH=$T/site:$TESTS/python
cd "$T" || exit 2
"$venv/bin/python" -m pytest -c "$TESTS/python/pytest.ini" -q -rs --basetemp="$T/pytest" \
	"$TESTS/python/$SUITE" "$@"
rc=$?
echo "tests/python/$SUITE: $(($(date +%s) - start)) s after the environment"
exit $rc
