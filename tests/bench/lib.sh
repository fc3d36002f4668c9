# Shared by the benchmark scripts.

# bench_size NORMAL SMOKE: a dataset dimension, SMOKE under BENCH_SMOKE=1
# (tests/bench/smoke.sh: every benchmark run once on tiny data, so that
# CI runs the scripts; its numbers mean nothing)
bench_size() { if [ -n "${BENCH_SMOKE:-}" ]; then echo "$2"; else echo "$1"; fi; }

# need CMD...: stop with a message naming every CMD that is not installed
# (tests/install-deps.sh installs them all)
need() {
	local c missing=()
	for c in "$@"; do command -v "$c" > /dev/null || missing+=("$c"); done
	[ ${#missing[@]} -eq 0 ] && return 0
	echo "$(basename "$0"): missing command: ${missing[*]} (bash tests/install-deps.sh installs it)" >&2
	exit 2
}

# median: the median of the numbers on stdin, one per line
median() { sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }

# ratio A B: A / B, two decimals
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }

# timed CMD...: the wall seconds CMD takes (its output dropped)
timed() {
	local t0 t1
	t0=$(date +%s.%N)
	"$@" > /dev/null
	t1=$(date +%s.%N)
	awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}'
}

# ddp_shards KIB: the directory of 32 indexed tar shards of 4 MiB, samples
# of KIB KiB, that bench_ddp.sh and bench_open.sh read (made once, kept
# under $BENCH_DIR); needs $top, $bin and $PY
ddp_shards() {
	local src=${BENCH_DIR:-/tmp/shardfs-bench}/ddp-32-$1
	if [ ! -d "$src" ]; then
		mkdir -p "$src"
		$PY "$top/tests/python/e2e/make_tars.py" "$src" \
			$(printf "$((4096 / $1)) %.0s" $(seq "$(bench_size 32 8)")) \
			--payload $(($1 * 1024)) >&2
	fi
	[ -f "$src/.shardfs/manifest.json" ] || "$bin/shardfs-index" "$src" --no-hash --quiet
	echo "$src"
}

# wait_mounted MNT SECONDS: wait until MNT answers, SECONDS at most; else
# say so and fail
wait_mounted() {
	local i
	for i in $(seq $(($2 * 100))); do
		mountpoint -q "$1" && return 0
		sleep 0.01
	done
	echo "$(basename "$0"): nothing mounted on $1 after $2 s" >&2
	return 1
}

# Foreground daemons in background jobs, for a benchmark that mounts
# several: bench_mount adds each mount point to $mounts, its log goes to
# $B/MNT.log (B: the script's scratch directory); the script sets
# `mounts=()` and `trap bench_cleanup EXIT` first.
# bench_mount CMD SRC MNT OPTS: mount, the daemon's pid in $pid, and wait
# (20 s at most) until it answers
bench_mount() {
	local log
	log=$B/$(basename "$3").log
	mkdir -p "$3"
	mounts+=("$3")
	"$1" "$2" "$3" -f -o "$4" > /dev/null 2> "$log" &
	pid=$!
	wait_mounted "$3" 20 && return 0
	cat "$log" >&2
	return 1
}
# bench_umount MNT PID: unmount, and wait for its daemon
bench_umount() { fusermount3 -u "$1"; wait "$2" || true; }
# bench_cleanup: unmount $mounts, the last first, wait for the daemons,
# remove $B
bench_cleanup() {
	local i
	for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
		# by /proc/mounts: a crashed FUSE server fails mountpoint -q
		grep -qF " ${mounts[i]} " /proc/mounts &&
			{ fusermount3 -u "${mounts[i]}" || umount -l "${mounts[i]}"; }
	done
	wait
	rm -rf --one-file-system "$B"
}
