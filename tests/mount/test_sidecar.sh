#!/usr/bin/env bash
# The sidecar entrypoint in a private mount namespace per case
# (tests/private_ns.sh: whatever it mounts goes with the namespace): the
# environment of each kind of pod gives the right rank directories to a
# second process in the same namespace; SIGTERM unmounts and exits 0; each
# broken environment gives its one-line message.  Such a namespace holds
# no copy of the views mounted when it was made.
. "$(dirname "$0")/../lib.sh"
sidecar="$TESTS/../mount-helpers/shardfs-sidecar"

shardfs-mkdata "$T/src" --format tar --shards 6 --samples 5-20 --seed 41 > /dev/null
shardfs-index "$T/src" --quiet
mkdir -p "$T/noindex" && cp "$T"/src/*.tar "$T/noindex/"
shardfs-mkdata "$T/src2" --format jsonl --shards 3 --samples 5-9 --seed 42 > /dev/null
shardfs-index "$T/src2" --quiet
printf '%s\n' '{"sources": [{"path": "src", "proportion": 1}, {"path": "src2", "proportion": 1}]}' > "$T/mix.json"
printf '%s\n' '{"sources": [{"path": "src", "proportion": 1}, {"path": "noindex", "proportion": 1}]}' > "$T/mix-noindex.json"

# in_ns SHARED ENV...: run the sidecar in a new mount namespace whose
# $T/ns is a tmpfs (shared when SHARED=1); print what a second process
# there sees (and in $LS below the mount when set; with READY=1, what the
# ready file is and holds, and every name in $T/ns), then SIGTERM it;
# prints "ls: ...", "exit=N", "mounted=N".  Ready is a regular file at
# the ready name, not a symlink to one.
in_ns() {
	local shared=$1
	shift
	bash "$TESTS/private_ns.sh" env "$@" PATH="$PATH" T="$T" S="$sidecar" SHARED="$shared" bash -c '
		mkdir -p "$T/ns" && mount -t tmpfs ns "$T/ns"
		[ "$SHARED" = 1 ] && mount --make-shared "$T/ns"
		export SHARDFS_MOUNT=$T/ns/data SHARDFS_READY_FILE=$T/ns/ready
		eval "${PRE:-}"
		bash "$S" 2> "$T/ns.log" &
		pid=$!
		ready() { [ -f "$T/ns/ready" ] && [ ! -L "$T/ns/ready" ]; }
		for i in $(seq 100); do ready && break; kill -0 $pid 2>/dev/null || break; sleep 0.1; done
		if ready; then
			echo "ls: $(ls "$T/ns/data" | tr "\n" " ")"
			[ -n "${LS:-}" ] && echo "ls $LS: $(ls "$T/ns/data/$LS" | tr "\n" " ")"
			[ -n "${READY:-}" ] && echo "ready: $(stat -c %F "$T/ns/ready"): $(cat "$T/ns/ready"); in ns: $(ls -A "$T/ns" | tr "\n" " ")"
		fi
		# never ready (or not yet gone): stopped, never waited on forever
		kill -TERM $pid 2>/dev/null
		wait $pid
		echo "exit=$?"
		echo "mounted=$(grep -c " $T/ns/data " /proc/mounts)"
		tail -1 "$T/ns.log" >&2
		umount -l "$T/ns"'
}

src=(SHARDFS_SOURCE="$T/src" SHARDFS_WORKERS=2)
expect_eq "torchrun: RANK, WORLD_SIZE" "$(in_ns 1 "${src[@]}" RANK=1 WORLD_SIZE=4 2>/dev/null)" \
	"ls: 1 
exit=0
mounted=0"
expect_eq "a node: NODE_RANK, LOCAL_WORLD_SIZE" "$(in_ns 1 "${src[@]}" NODE_RANK=1 LOCAL_WORLD_SIZE=2 WORLD_SIZE=4 2>/dev/null)" \
	"ls: 2 3 
exit=0
mounted=0"
expect_eq "a node: NPROC_PER_NODE, NNODES" "$(in_ns 1 "${src[@]}" NODE_RANK=0 NPROC_PER_NODE=3 NNODES=2 2>/dev/null)" \
	"ls: 0 1 2 
exit=0
mounted=0"
expect_eq "Indexed Job: JOB_COMPLETION_INDEX" "$(in_ns 1 "${src[@]}" JOB_COMPLETION_INDEX=2 SHARDFS_WORLD=3 2>/dev/null)" \
	"ls: 2 
exit=0
mounted=0"
expect_eq "PyTorchJob: replica index + offset" "$(in_ns 1 "${src[@]}" SHARDFS_REPLICA_INDEX=2 SHARDFS_RANK_OFFSET=1 SHARDFS_WORLD=4 RANK=0 WORLD_SIZE=4 2>/dev/null)" \
	"ls: 3 
exit=0
mounted=0"
expect_eq "a mixture file as the source" "$(in_ns 1 SHARDFS_SOURCE="$T/mix.json" RANK=1 WORLD_SIZE=2 SHARDFS_WORKERS=2 2>/dev/null)" \
	"ls: 1 
exit=0
mounted=0"
mkdir -p "$T/grow"
printf 'a\nb\nc\nd\n' > "$T/grow/c0.jsonl"
expect_eq "a source that grows: follow=1, no index to wait for" "$(in_ns 1 SHARDFS_SOURCE="$T/grow" RANK=1 WORLD_SIZE=2 SHARDFS_WORKERS=2 SHARDFS_INDEX_TIMEOUT=1 SHARDFS_OPTIONS=follow=1,window=4 LS=1/1 2>/dev/null)" \
	"ls: 1 
ls 1/1: stream.jsonl window-00000000.jsonl 
exit=0
mounted=0"
expect_eq "SHARDFS_* win" "$(in_ns 1 "${src[@]}" RANK=3 WORLD_SIZE=4 SHARDFS_RANK=0 SHARDFS_WORLD=2 2>/dev/null)" \
	"ls: 0 
exit=0
mounted=0"
# a restarted sidecar finds the dead view of a daemon that was killed
dead='mkdir -p "$SHARDFS_MOUNT"; shardfs "$SHARDFS_SOURCE" "$SHARDFS_MOUNT" -f -o world=1 2>/dev/null & p=$!
	for i in $(seq 100); do mountpoint -q "$SHARDFS_MOUNT" && break; sleep 0.05; done; kill -KILL $p; wait $p'
expect_eq "a dead view is cleared and mounted again" "$(in_ns 1 "${src[@]}" RANK=2 WORLD_SIZE=4 PRE="$dead" 2>/dev/null)" \
	"ls: 2 
exit=0
mounted=0"
expect_eq "a dead view: said so" "$(grep -c "cleared the dead view on $T/ns/data that a daemon which died left behind" "$T/ns.log")" 1

# the ready file is in the volume the trainer writes: a symlink left
# there (a sidecar restarted) must not carry root's write elsewhere
echo precious > "$T/victim"
expect_eq "a symlink at the ready name: not written through" "$(in_ns 1 "${src[@]}" RANK=1 WORLD_SIZE=4 READY=1 PRE='ln -s "$T/victim" "$T/ns/ready"' 2>/dev/null)" \
	"ls: 1 
ready: regular file: epoch=0 rank=1 world=4; in ns: data ready 
exit=0
mounted=0"
expect_eq "a symlink at the ready name: its target unchanged" "$(cat "$T/victim"; stat -c %U "$T/victim")" "precious
root"
expect_eq "a dangling symlink at the ready name: nothing created" "$(in_ns 1 "${src[@]}" RANK=1 WORLD_SIZE=4 READY=1 PRE='ln -s "$T/made" "$T/ns/ready"' 2>/dev/null; ls "$T/made" 2>&1)" \
	"ls: 1 
ready: regular file: epoch=0 rank=1 world=4; in ns: data ready 
exit=0
mounted=0
ls: cannot access '$T/made': No such file or directory"
expect_eq "a symlink to a directory at the ready name: nothing moved into it" "$(mkdir -p "$T/dir"; in_ns 1 "${src[@]}" RANK=1 WORLD_SIZE=4 READY=1 PRE='ln -s "$T/dir" "$T/ns/ready"' 2>/dev/null; ls -A "$T/dir")" \
	"ls: 1 
ready: regular file: epoch=0 rank=1 world=4; in ns: data ready 
exit=0
mounted=0"

# broken environments: one line each, exit 1, nothing mounted
broken() {
	local name=$1 shared=$2 want=$3
	shift 3
	got=$(in_ns "$shared" "$@" 2>&1)
	expect_eq "$name" "$got" "exit=1
mounted=0
shardfs-sidecar: $want"
}
broken "a symlink at the mount point" 1 "the mount point $T/ns/data is a symlink (to $T/ns/elsewhere): remove it (the trainer must not create $T/ns/data; the sidecar does)" \
	SHARDFS_SOURCE="$T/src" RANK=0 WORLD_SIZE=1 PRE='mkdir "$T/ns/elsewhere"; ln -s "$T/ns/elsewhere" "$SHARDFS_MOUNT"'
broken "a directory at the ready name" 1 "cannot write the ready file $T/ns/ready: make its directory one the sidecar can write and remove what is at that name (a directory?), or set SHARDFS_READY_FILE" \
	SHARDFS_SOURCE="$T/src" RANK=0 WORLD_SIZE=1 PRE='mkdir "$T/ns/ready"'
broken "no source" 1 "SHARDFS_SOURCE=$T/none does not exist: mount the dataset volume (or the mixture file) into the sidecar at $T/none" \
	SHARDFS_SOURCE="$T/none" RANK=0 WORLD_SIZE=1
broken "no rank" 1 "no rank: set SHARDFS_RANK, or run under a launcher that sets RANK, NODE_RANK with LOCAL_WORLD_SIZE, or JOB_COMPLETION_INDEX" \
	SHARDFS_SOURCE="$T/src"
broken "no world" 1 "no world size for rank 2: set SHARDFS_WORLD (or WORLD_SIZE, or NNODES with NODE_RANK)" \
	SHARDFS_SOURCE="$T/src" JOB_COMPLETION_INDEX=2
broken "not shared" 0 "$T/ns/data is on $T/ns, which is not a shared mount (private): set mountPropagation: Bidirectional on the sidecar's volumeMount (and HostToContainer on the trainer's)" \
	SHARDFS_SOURCE="$T/src" RANK=0 WORLD_SIZE=1
broken "no index" 1 "no index at $T/noindex/.shardfs/manifest.json after 1s: run the index Job first (k8s/index-job.yaml) or raise SHARDFS_INDEX_TIMEOUT" \
	SHARDFS_SOURCE="$T/noindex" RANK=0 WORLD_SIZE=1 SHARDFS_INDEX_TIMEOUT=1
broken "a mixture source without index" 1 "the mixture $T/mix-noindex.json cannot be served after 1s: shardfs-plan: $T/mix-noindex.json: source \"noindex\": $T/noindex/.shardfs/manifest.json: no index; build it with: shardfs-index $T/noindex" \
	SHARDFS_SOURCE="$T/mix-noindex.json" RANK=0 WORLD_SIZE=1 SHARDFS_INDEX_TIMEOUT=1
broken "bad option" 1 "the view did not come up (shardfs exited with status 1; its message is above)" \
	SHARDFS_SOURCE="$T/src" RANK=5 WORLD_SIZE=2
# values that go into the daemon's -o list: a comma would add an option
broken "a comma in the rank" 1 "rank \"0,allow_other\" is not a number (or a range a-b): fix SHARDFS_RANK or the launcher's RANK" \
	SHARDFS_SOURCE="$T/src" RANK=0,allow_other WORLD_SIZE=1
broken "a comma in the world" 1 "world \"2,allow_other\" is not a number: fix SHARDFS_WORLD (or the launcher's variable it came from)" \
	SHARDFS_SOURCE="$T/src" RANK=0 WORLD_SIZE=2,allow_other
broken "a comma in the index" 1 "SHARDFS_INDEX=$T/src/.shardfs,allow_other holds a comma, which would end the -o option: move the index to a directory without one (shardfs-index SRC --out DIR)" \
	SHARDFS_SOURCE="$T/src" RANK=0 WORLD_SIZE=1 SHARDFS_INDEX="$T/src/.shardfs,allow_other"
got=$(bash "$TESTS/private_ns.sh" env PATH="$PATH" T="$T" S="$sidecar" bash -c '
	mount -t tmpfs nodev /dev
	SHARDFS_SOURCE=$T/src RANK=0 WORLD_SIZE=1 bash "$S"; echo "exit=$?"' 2>&1)
expect_eq "no /dev/fuse" "$got" "shardfs-sidecar: /dev/fuse is missing: give the container the device (securityContext.privileged: true, or a /dev/fuse device plugin)
exit=1"

# a namespace made while a view is mounted (another test's, run beside
# this one) lets go of it: the view's daemon exits at its unmount, not
# when that namespace ends (a copy of the view kept the daemon serving,
# and a test that waits 30 s for its daemon failed while, say, a
# deployment test's namespace lived)
mount_view "$T/src2" "$T/v" world=1 || bad "mount v"
bash "$TESTS/private_ns.sh" bash -c 'touch "$1"; exec sleep 60' _ "$T/ns-up" &
ns=$!
for i in $(seq 100); do [ -e "$T/ns-up" ] && break; sleep 0.1; done
SECONDS=0
unmount_view "$T/v"
expect_eq "a view's daemon exits at its unmount while a later namespace lives" \
	"$((SECONDS < 20))" 1
kill "$ns"
wait "$ns"
finish
