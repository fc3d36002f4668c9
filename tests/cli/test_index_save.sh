#!/bin/bash
# A save that fails (a full disk under --out) leaves the index directory
# as it found it (issue 30): no samples-*, blocks-* or digests-* table
# that no manifest names, no temporary file; an index already there is
# untouched and still loads.  Needs root (a small tmpfs as the --out dir).
. "$(dirname "$0")/../lib.sh"
FULL=$T/full
mkdir -p "$FULL"
# unmounted on every path, before lib.sh's trap removes $T
trap 'mountpoint -q "$FULL" && umount "$FULL"; rm -rf "$T"' EXIT

# 4 shards of 20000 lines: a boundary table of 640 KB, a digest table of
# 2.5 MB, spilled (3.2 MB) in the index directory while they are written
# (the digests' spill becomes their table when it holds it as it is to
# be: no room for a copy is needed then): in 3.5 MB the spill fits, the
# boundary table does not
shardfs-mkdata "$T/src" --format jsonl --shards 4 --samples 20000 --size 10 >/dev/null
mount -t tmpfs -o size=3500k tmpfs "$FULL" || { bad "mount a tmpfs"; finish; exit; }

expect_run "a full disk fails the save" 2 \
	"shardfs-index: $FULL/idx/.samples-PID.tmp: cannot write the index: No space left on device; free space there or put the index elsewhere with --out DIR" -- \
	bash -c 'shardfs-index "$1" --out "$2" --quiet 2>&1 >/dev/null | sed -E "s/samples-[0-9]+-[0-9a-f]+\.tmp/samples-PID.tmp/" >&2; exit ${PIPESTATUS[0]}' \
	_ "$T/src" "$FULL/idx"
expect_eq "a failed save leaves no file behind" "$(ls -A "$FULL/idx")" ""

# an index that fits is saved; a failed save beside it (the same tables:
# in 4 MB the spill fits beside it, a second boundary table does not)
# leaves it whole
mount -o remount,size=4m "$FULL" || bad "grow the tmpfs"
shardfs-index "$T/src" --out "$FULL/idx" --quiet --no-hash || bad "index without hashes"
before=$(ls -A "$FULL/idx" | sort | tr '\n' ' ')
expect_eq "an index without hashes: manifest, boundaries and blocks" \
	"$(ls -A "$FULL/idx" | sed -E 's/-[0-9a-f]{16}\.bin$/-X.bin/' | sort | tr '\n' ' ')" \
	"blocks-X.bin manifest.json samples-X.bin "
shardfs-index "$T/src" --out "$FULL/idx" --quiet 2>/dev/null
expect_eq "a failed save beside an index: status" "$?" 2
expect_eq "a failed save beside an index leaves it as it was" \
	"$(ls -A "$FULL/idx" | sort | tr '\n' ' ')" "$before"
expect_run "the index still loads" 0 "" -- \
	shardfs-plan "$T/src" --index "$FULL/idx"

umount "$FULL"
finish
