#!/usr/bin/env bash
# The WebDataset and wids recipes of docs/loaders.md against the real
# WebDataset: by default the pinned PyPI releases of
# tests/python/requirements.txt (webdataset 1.0.2, wids 0.1.11), installed
# into the cached environment of tests/python/venv.sh (the ctest
# python_webdataset; an install that fails is a failure); or, with
# WEBDATASET_SRC naming a checkout of github.com/webdataset/webdataset
# (any tag), that checkout with Debian's python3.
#
# DDP jobs over gloo read the mounts through the recipe (world 2 and 4,
# 2 workers, uneven data, pad and drop, .tgz and .tar.gz shards, two
# epochs under one pipeline and DataLoader) and are checked like
# test_e2e.sh's; an epoch stopped at world=4 is resumed at world=2; a
# DataLoader with other workers than the mount is refused.  Where wids
# imports (PyPI's wids, or a 0.2.x checkout), the wids recipe reads every
# rank with cache_dir, and wids in place is refused by the read-only view.
. "$(dirname "$0")/lib.sh"

if [ -n "${WEBDATASET_SRC:-}" ]; then
	if [ -d "$WEBDATASET_SRC/src/webdataset" ]; then
		export PYTHONPATH=$WEBDATASET_SRC/src
	else
		export PYTHONPATH=$WEBDATASET_SRC
	fi
	where="from $PYTHONPATH"
else
	venv=$(bash "$TESTS/python/venv.sh" "$TESTS/python/requirements.txt") || {
		bad "could not install tests/python/requirements.txt (WebDataset from PyPI)"
		finish
		exit
	}
	PY=$venv/bin/python
	where="from PyPI ($venv)"
fi
version=$($PY -c 'import webdataset; print(getattr(webdataset, "__version__", "(no __version__)"))') || {
	bad "webdataset ($where) does not import with $PY (it needs Debian's python3-braceexpand, python3-numpy, python3-yaml)"
	finish
	exit
}
echo "WebDataset $version $where"

e2e_data
DDP_ARGS="--recipe webdataset"
ddp_jobs

# compressed shards (.tgz, .tar.gz): never sliced, so every reader's
# share here is one whole shard
mkdir -p "$T/gz"
$PY "$E/make_tars.py" "$T/gz" 8 8 8 8
gzip -n "$T/gz/shard-0001.tar" "$T/gz/shard-0003.tar"
mv "$T/gz/shard-0001.tar.gz" "$T/gz/shard-0001.tgz"
shardfs-index "$T/gz" --quiet
ddp ddp-gz "$T/gz" "world=2,workers=2,batch=4" 0,1

# num_workers other than the mount's workers: refused, in the workers
# (num_workers=1) and in the main process (num_workers=0)
mount_view "$T/even" "$T/mnt-guard" "world=2,workers=2"
for k in 1 0; do
	expect_eq "a DataLoader with num_workers=$k on a workers=2 mount is refused" "$(cd "$E" && $PY - "$T/mnt-guard/1" $k 2>&1 <<'PY' | grep '^RuntimeError' | tail -1
import sys, recipes
from torch.utils.data import DataLoader
ds = recipes.load("webdataset").shardfs_webdataset(sys.argv[1])
next(iter(DataLoader(ds, batch_size=None, num_workers=int(sys.argv[2]))))
PY
)" "RuntimeError: $T/mnt-guard/1 has 2 worker directories but the DataLoader has num_workers=$k: make them equal (num_workers=0 reads a workers=1 mount)"
done
unmount_view "$T/mnt-guard"

if $PY -c "import wids" 2>/dev/null; then
	echo "wids $($PY -c 'from importlib.metadata import version; print(version("wids"))' 2>/dev/null || echo "from $where")"
	mount_view "$T/uneven" "$T/mnt-wids" "world=3,workers=1,batch=4,epoch=2"
	run "wids with cache_dir" $PY "$E/wids_check.py" cache "$T/uneven" "$T/mnt-wids" "$T/wids-cache"
	expect_eq "wids in place is refused by the read-only view" "$($PY "$E/wids_check.py" inplace "$T/uneven" "$T/mnt-wids" "$T/wids-list" 2>&1 | tail -1)" \
		"OSError: [Errno 30] Read-only file system: '$T/mnt-wids/0/0/$(ls "$T/mnt-wids/0/0" | head -1).lock'"
	unmount_view "$T/mnt-wids"
else
	bad "wids does not import ($where): WebDataset 0.3 moved it out of the repository; PyPI's wids is in tests/python/requirements.txt"
fi
finish
