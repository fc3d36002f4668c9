#!/usr/bin/env bash
# The container image: k8s/Dockerfile built with podman (from Debian's
# packages; chroot isolation, no Docker engine), on base images imported
# from the test's Debian 12 root, then run the way a pod runs it --
# `podman run` cannot (the runtime cannot set rlimits here), so the image's
# root file system is mounted (podman image mount) and each container is a
# chroot in its own mount namespace (container.sh): the index Job writes a
# dataset and its index, the sidecar entrypoint serves rank 1 of 2 to a
# trainer in another mount namespace through mount propagation, a
# `kubectl exec` audits the view, and SIGTERM unmounts it everywhere.
#
# The whole test runs in a private mount namespace of its own: whatever it
# mounts, and does not unmount by path first, goes with it.
if [ -z "${SHARDFS_TEST_NS:-}" ]; then
	exec bash "$(dirname "$0")/../private_ns.sh" env SHARDFS_TEST_NS=1 bash "$0" "$@"
fi
. "$(dirname "$0")/lib.sh"
image=localhost/shardfs:$VERSION
# the runtime image must stay about the size of its Debian packages
max_mb=160

cleanup() {
	# a sidecar still up: stopped, and its view unmounted in every namespace
	[ -n "${sidecar:-}" ] && kill -0 "$sidecar" 2>/dev/null && kill -KILL "$sidecar"
	mountpoint -q "$T/pod/data" && umount -l "$T/pod/data"
	mountpoint -q "$T/pod" && umount "$T/pod"
	[ -n "${root:-}" ] && podman image unmount "$image" > /dev/null
	wait
	rm -rf --one-file-system "$T"
}
trap cleanup EXIT

need_debs podman debootstrap
make_base

# podman with a store of its own in the cache, so that the base images the
# Dockerfile names are the ones made here, whatever else the machine's
# podman holds; one run of this test at a time uses it
podman() {
	command podman --root "$cache/podman" --runroot "$cache/podman-run" \
		--tmpdir "$cache/podman-tmp" --storage-driver overlay "$@"
}
exec {plock}> "$cache/podman.lock"
flock "$plock"
podman image unmount --all --force > /dev/null

# debian:12 and debian:12-slim, the Dockerfile's bases, from the same root
# without apt's lists and /dev's nodes; the slim one also without the
# documentation, man pages and translations, and with dpkg told to leave
# them out of what it installs, as Debian's own slim images do.
# import_base TAG TAR-ARGUMENTS...
import_base() {
	local tag=$1
	shift
	podman image exists "$tag" && return 0
	echo "importing $tag from $base"
	if ! tar --exclude='./var/lib/apt/lists/*' --exclude='./dev/*' \
		--numeric-owner -c "$@" | podman import - "$tag" > "$T/import.log" 2>&1; then
		cat "$T/import.log" >&2
		die "podman import of $tag from $base failed (above)"
	fi
}
import_base localhost/debian:12 -C "$base" .
mkdir -p "$T/slim/etc/dpkg/dpkg.cfg.d"
printf 'path-exclude %s\n' '/usr/share/doc/*' '/usr/share/man/*' \
	'/usr/share/info/*' '/usr/share/locale/*' \
	> "$T/slim/etc/dpkg/dpkg.cfg.d/slim"
echo 'path-include /usr/share/doc/*/copyright' >> "$T/slim/etc/dpkg/dpkg.cfg.d/slim"
(cd "$base" && find ./usr/share/doc -type f ! -name copyright &&
	find ./usr/share/man ./usr/share/info ./usr/share/locale -mindepth 1 -maxdepth 1) \
	> "$T/slim-excluded"
import_base localhost/debian:12-slim --no-wildcards -X "$T/slim-excluded" \
	-C "$base" . -C "$T/slim" ./etc/dpkg/dpkg.cfg.d/slim

# the image, as the Dockerfile says (layers cached by podman between runs)
echo "podman build -f k8s/Dockerfile -t $image"
start=$(date +%s)
if ! podman build --isolation=chroot --pull=never -f "$TESTS/../k8s/Dockerfile" \
	-t "$image" "$TESTS/.." > "$T/build.log" 2>&1; then
	tail -20 "$T/build.log" >&2
	die "podman build of k8s/Dockerfile failed (above)"
fi
echo "built in $(($(date +%s) - start)) s"
size=$(podman image inspect --format '{{.Size}}' "$image")
echo "image size: $((size / 1000000)) MB"
[ "$((size / 1000000))" -le "$max_mb" ] && ok ||
	bad "$image is $((size / 1000000)) MB, more than $max_mb MB: find the layer that grew in \`podman history $image\` (apt's caches, recommended packages?)"
expect_eq "entrypoint" "$(podman image inspect --format '{{json .Config.Entrypoint}}' "$image")" \
	'["/usr/local/bin/shardfs-sidecar"]'
root=$(podman image mount "$image")
expect_eq "the image's programs" "$(cd "$root" && ls sbin/mount.shardfs usr/local/bin | tr '\n' ' ')" \
	"sbin/mount.shardfs  usr/local/bin: shardfs shardfs-check shardfs-index shardfs-mkdata shardfs-plan shardfs-sidecar "

# "${container[@]}" SCRATCH VOLUME... -- [NAME=VALUE...] CMD...: a container
# of the image, in a mount namespace of its own; the same process all along
container=(unshare -m --propagation unchanged bash "$TESTS/deploy/container.sh" "$root")

# the index Job (k8s/index-job.yaml): the dataset volume read-write
mkdir -p "$T/src"
"${container[@]}" "$T/mkdata" rw:"$T/src":/data/train -- shardfs-mkdata /data/train --format tar \
	--shards 6 --samples 5-20 --seed 51 > /dev/null
"${container[@]}" "$T/index" rw:"$T/src":/data/train -- shardfs-index /data/train --quiet
expect_eq "index Job: exit status" "$?" 0
[ -f "$T/src/.shardfs/manifest.json" ] && ok || bad "index Job: no $T/src/.shardfs/manifest.json"

# the pod: its emptyDir is a shared mount on the node
mkdir -p "$T/pod"
mount -t tmpfs pod "$T/pod"
mount --make-shared "$T/pod"

# the trainer (mountPropagation: HostToContainer), in its mount namespace
# before the sidecar mounts anything: it sees the view only by propagation
unshare -m --propagation unchanged env V="$T/pod" bash -c '
	mount --make-rslave "$V"
	echo > "$V.trainer-up"
	for i in $(seq 600); do [ -f "$V/.shardfs-ready" ] && break; sleep 0.1; done
	echo "ready: $(cat "$V/.shardfs-ready")"
	echo "ranks: $(ls "$V/data" | tr "\n" " ")"
	echo "workers: $(ls "$V/data/1" | tr "\n" " ")"
	(cd "$V/data" && find 1 -type f | sort | xargs sha256sum) > "$V.trainer-sums"
	echo > "$V.trainer-read"
	for i in $(seq 600); do mountpoint -q "$V/data" || break; sleep 0.1; done
	echo "after SIGTERM: $(grep -c " $V/data " /proc/self/mounts) mounts; left: $(ls -A "$V")"
' > "$T/trainer.out" 2>&1 &
trainer=$!
for i in $(seq 100); do [ -f "$T/pod.trainer-up" ] && break; sleep 0.1; done

# the sidecar (k8s/sidecar-pod.yaml): the dataset read-only, the emptyDir
# Bidirectional; the image's entrypoint, rank 1 of 2 from torchrun's
# variables; symlinks=0: the trainer does not see the dataset, whole
# shards must be files, not symlinks into it
"${container[@]}" "$T/sidecar" ro:"$T/src":/data/train bidirectional:"$T/pod":/mnt/shardfs -- \
	SHARDFS_SOURCE=/data/train SHARDFS_MOUNT=/mnt/shardfs/data \
	RANK=1 WORLD_SIZE=2 SHARDFS_WORKERS=2 SHARDFS_OPTIONS=seed=7,symlinks=0 \
	/usr/local/bin/shardfs-sidecar 2> "$T/sidecar.log" &
sidecar=$!
for i in $(seq 600); do
	[ -f "$T/pod.trainer-read" ] && break
	kill -0 "$sidecar" 2>/dev/null || break
	sleep 0.1
done
[ -f "$T/pod.trainer-read" ] && ok || { cat "$T/sidecar.log" "$T/trainer.out" >&2; die "the trainer never read the view"; }

# kubectl exec into the sidecar: the auditor, and the same bytes
in_sidecar() {
	nsenter -t "$sidecar" -m -r -w env -i PATH=/usr/local/bin:/usr/bin:/bin "$@"
}
# the auditor on this node's view, judged alone: rank 0 is on another
# node, so its samples are missing, and nothing else may be found (no
# wrong bytes, order, overlap or count)
out=$(in_sidecar sh -c 'shardfs-check view /mnt/shardfs/data --emit /tmp/rank1.json &&
	shardfs-check merge /tmp/rank1.json' 2>&1)
expect_eq "shardfs-check in the sidecar: the report" "$(head -2 <<< "$out")" \
	"shardfs-check: wrote /tmp/rank1.json: 2 readers of 1 mount
merge: 2 of 4 readers, 21 samples each (82 remaining, 2 padded, 0 dropped)"
[[ "$(sed -n 3p <<< "$out")" =~ ^FAIL:\ [0-9]+\ findings:\ 1\ coverage\ [0-9]+\ missing$ ]] &&
	[ "$(sed -n 4p <<< "$out")" = "  coverage: rank 0 is shown by no mount" ] && ok ||
	bad "shardfs-check in the sidecar found more than rank 0's absence: $out"
expect_eq "the trainer reads the sidecar's bytes" \
	"$(in_sidecar sh -c 'cd /mnt/shardfs/data && find 1 -type f | sort | xargs sha256sum')" \
	"$(cat "$T/pod.trainer-sums")"
expect_eq "files the trainer read: the plan's" "$(wc -l < "$T/pod.trainer-sums")" \
	"$(in_sidecar shardfs-plan /data/train -o world=2,workers=2,seed=7,rank=1 |
		awk '$1 == 1 { n += $5 } END { print n }')"

kill -TERM "$sidecar"
wait "$sidecar"
expect_eq "sidecar: SIGTERM, exit 0" "$?" 0
expect_eq "sidecar: its last words" "$(tail -1 "$T/sidecar.log")" \
	"shardfs-sidecar: unmounted /mnt/shardfs/data"
wait "$trainer"
expect_eq "the trainer's view" "$(cat "$T/trainer.out")" "ready: epoch=0 rank=1 world=2
ranks: 1 
workers: 0 1 
after SIGTERM: 0 mounts; left: data"
expect_eq "the node: nothing mounted on the emptyDir" "$(grep -c " $T/pod/" /proc/self/mounts)" 0
umount "$T/pod"
finish
