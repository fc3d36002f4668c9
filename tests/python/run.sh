#!/usr/bin/env bash
# run.sh BUILD TESTS SUITE [PYTEST ARGS]: the pytest suite tests/python/SUITE
# (package: the shardfs package on real mounts; loaders: Parquet readers,
# WebDataset, DDP and Lightning jobs through it) in the virtual environment
# of requirements.txt (venv.sh: built once, then reused), with the sources
# of ./python copied for this run alone (first on PYTHONPATH).  Every mount is made under a scratch directory that is
# removed on exit; anything still mounted there (a pytest killed by a
# timeout, or this script killed by ctest's: guard.sh) is unmounted
# first, by its path.
set -uo pipefail
BUILD=$(cd "$1" && pwd)
TESTS=$(cd "$2" && pwd)
SUITE=$3
shift 3
T=$(mktemp -d /tmp/shardfs-py-XXXXXX)
. "$TESTS/guard.sh"
guard_scratch "$T"
cleanup() {
	unmount_beneath "$T" >/dev/null
	rm -rf --one-file-system "$T"
}
trap cleanup EXIT
venv=$(bash "$TESTS/python/venv.sh" "$TESTS/python/requirements.txt") || exit 2
start=$(date +%s)
# the package's sources from the tree, every run, copied into this run's
# own directory, first on the path: never into the shared environment,
# where two suites run at once by ctest -j would overwrite each other;
# not pip-installed, which builds the wheel with its programs (the C
# build; tests/deploy/test_wheel.sh does that): the programs are the
# build's, on PATH
mkdir -p "$T/site"
cp -r "$TESTS/../python/shardfs" "$T/site/"
export PATH="$BUILD:$PATH" SHARDFS_TESTS=$TESTS SHARDFS_TMP=$T \
	PYTHONPATH=$T/site:$TESTS/python
cd "$T" || exit 2
"$venv/bin/python" -m pytest -c "$TESTS/python/pytest.ini" -q -rs --basetemp="$T/pytest" \
	"$TESTS/python/$SUITE" "$@"
rc=$?
echo "tests/python/$SUITE: $(($(date +%s) - start)) s after the environment"
exit $rc
