#!/usr/bin/env bash
# Unmodified loaders end to end: PyTorch DDP jobs (gloo, CPU) with one
# shardfs mount per rank, uneven data under pad and drop, an elastic
# resume from world=4 to world=2, a multi-epoch directory, and loaders that
# know nothing of ranks (torchvision ImageFolder, JSONL lines, a glob).
# Debian's Python runs the jobs (python3-torch lives there).  Every mount is
# unmounted on every exit; a job that hangs is killed by its timeout and
# fails.
. "$(dirname "$0")/lib.sh"

$PY -c 'import torch, torchvision' || { bad "Debian's python3-torch and python3-torchvision are needed (tests/install-deps.sh)"; finish; exit; }

e2e_data
naive=$($PY - "$T/uneven" "$E" <<'PY'
import os, sys
sys.path.insert(0, sys.argv[2])
from expect import sample_keys
d = sys.argv[1]
shards = sorted(f for f in os.listdir(d) if f.endswith(".tar"))
print(" ".join(str(sum(len(sample_keys(os.path.join(d, s))) for s in shards[r::4])) for r in range(4)))
PY
)
expect_eq "uneven data: shards[rank::4] gives unequal ranks (the hang)" "$naive" "23 162 42 70"
# ... and the same job reading the source that way fails by its timeout
# (the harness sees a hang), where the shardfs jobs below run through
out=$(timeout 300 $PY "$E/ddp.py" --world 4 --workers 2 --batch 4 --source "$T/uneven" \
	--epochs 0 --out "$T/naive" --timeout 10 2>&1)
expect_eq "the naive job fails" "$?" 1
expect_eq "the naive job's ranks time out in gloo" \
	"$(grep -c 'rank [0-3] exited with 1' <<<"$out") $(grep -c -m1 'RuntimeError: .*Timed out waiting' <<<"$out")" "4 1"

ddp_jobs
# the recipe reads with the shardfs package's tar reader when it imports
# (pip install ./python; here from the tree): the same exact checks
PYTHONPATH=$TESTS/../python ddp ddp-w4-package "$T/uneven" "world=4,workers=2,batch=4,remainder=pad,block=16,shuffle=samples" 0,1
expect_eq "the recipe's tar reader: tarfile, then the package's" \
	"$(cat "$T/ddp-w2/reader-1") $(cat "$T/ddp-w4-package/reader-3")" \
	"tarfile shardfs.samples.tar_samples"

# a mixture of three datasets of uneven sizes, weighted 5:3:2 in epochs of
# 400: every rank runs the same steps, each source's share exactly its
# allocation; and a replica group of two ranks reading the same batches
mkdir -p "$T/mix/web" "$T/mix/code" "$T/mix/math"
$PY "$E/make_tars.py" "$T/mix/web" 50 70 30 90 --first 100000
$PY "$E/make_tars.py" "$T/mix/code" 11 23 7 --first 200000
$PY "$E/make_tars.py" "$T/mix/math" 9 14 --first 300000
for s in web code math; do shardfs-index "$T/mix/$s" --quiet; done
printf '%s\n' '{"sources": [{"path": "web", "proportion": 5}, {"path": "code", "proportion": 3},
  {"path": "math", "proportion": 2}], "epoch_size": 400}' > "$T/mix/mix.json"
ddp ddp-mixture "$T/mix/mix.json" "world=4,workers=2,batch=4,block=8,shuffle=samples" 0,1
ddp ddp-replicas "$T/uneven" "world=4,workers=2,batch=4,replicas=2,block=8" 0,1

# a directory listed once holds epochs=3 epochs
mount_view "$T/even" "$T/mnt-epochs" "world=2,workers=2,epochs=3,epoch=4,seed=3"
run "epochs=3" $PY "$E/legacy.py" epochs "$T/even" "$T/mnt-epochs"
unmount_view "$T/mnt-epochs"

# loaders that know nothing of ranks
mount_view "$T/even" "$T/mnt-glob" "world=4,workers=2"
run "glob rank 3" $PY "$E/legacy.py" glob "$T/even" "$T/mnt-glob" 3
expect_eq "a DataLoader with other workers than the mount is refused" "$(cd "$E" && $PY - "$T/mnt-glob/1" 2>&1 <<'PY' | tail -1
import sys, recipes
from torch.utils.data import DataLoader
next(iter(DataLoader(recipes.load("torch_tar").ShardfsTar(sys.argv[1]), num_workers=0)))
PY
)" "RuntimeError: $T/mnt-glob/1 has 2 worker directories but the DataLoader has num_workers=0: make them equal (num_workers=0 reads a workers=1 mount)"
unmount_view "$T/mnt-glob"

shardfs-mkdata "$T/jsonl" --format jsonl --shards 7 --samples 5-50 --seed 6 >/dev/null
shardfs-index "$T/jsonl" --quiet
mount_view "$T/jsonl" "$T/mnt-jsonl" "world=2,workers=2,block=9"
run "JSONL lines" $PY "$E/legacy.py" lines "$T/jsonl" "$T/mnt-jsonl"
unmount_view "$T/mnt-jsonl"

shardfs-mkdata "$T/files" --format files --shards 5 --samples 7-13 --seed 2 >/dev/null
shardfs-index "$T/files" --format files --quiet
mount_view "$T/files" "$T/mnt-files" "world=6,workers=1"
run "ImageFolder" $PY "$E/legacy.py" folder "$T/files" "$T/mnt-files"
unmount_view "$T/mnt-files"
finish
