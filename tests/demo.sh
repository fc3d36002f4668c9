#!/usr/bin/env bash
# The README's main job: install, build, generate a sample dataset, index
# it, and show what every rank and worker will read.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
bash tests/install-deps.sh
cmake -S . -B build >/dev/null
cmake --build build -j "$(nproc)" >/dev/null
bin=$top/build

data=$(mktemp -d /tmp/shardfs-demo-XXXXXX)
trap 'rm -rf "$data"' EXIT
echo "== a WebDataset-style dataset: 12 tar shards, 40-90 samples each"
"$bin/shardfs-mkdata" "$data/src" --format tar --shards 12 --samples 40-90 --seed 1
ls -l "$data/src" | head -5
echo "..."
echo
echo "== index it (sample boundaries + SHA-256 of every shard)"
"$bin/shardfs-index" "$data/src"
echo
echo "== the plan for world=4 ranks x workers=2, epoch 0: equal counts for every reader"
"$bin/shardfs-plan" "$data/src" -o world=4,workers=2,epoch=0
echo
echo "== epoch 1: the same samples in a new order"
"$bin/shardfs-plan" "$data/src" -o world=4,workers=2,epoch=1 | tail -n +3
echo
echo "== check the index against the shards"
"$bin/shardfs-index" "$data/src" --verify
