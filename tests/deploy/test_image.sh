#!/usr/bin/env bash
# The container image, built from k8s/Dockerfile with podman (chroot
# isolation; the debian:12 and debian:12-slim bases made here from Debian's
# packages, as no registry is reachable) and exercised the way a pod runs
# it: its root file system (podman image mount) entered with unshare -m +
# chroot and the mounts a pod gives the sidecar (/dev/fuse, the source
# read-only, an emptyDir with shared propagation); the entrypoint serves a
# rank's view that a second mount namespace (the trainer, HostToContainer)
# sees through propagation, byte for byte as a view mounted on the host;
# SIGTERM unmounts it in both.
. "$(dirname "$0")/lib.sh"
top=$(cd "$TESTS/.." && pwd)
tag=localhost/shardfs:test
need_packages podman
debian_root

# --- the bases: debian:12 is the minbase root; debian:12-slim the same
# without documentation, manuals and locales, as Debian's slim images ---
if ! podman image exists localhost/debian:12-slim; then
	tar -C "$DEBIAN_ROOT" --exclude=./.shardfs-complete -c . | podman import - localhost/debian:12 > /dev/null ||
		bad "podman import debian:12"
	rm -rf "$T/slim" && cp -a "$DEBIAN_ROOT" "$T/slim"
	rm -rf "$T"/slim/usr/share/{doc,man,info,locale}/* "$T/slim/.shardfs-complete"
	cat > "$T/slim/etc/dpkg/dpkg.cfg.d/slim" <<'CFG'
path-exclude /usr/share/doc/*
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
CFG
	tar -C "$T/slim" -c . | podman import - localhost/debian:12-slim > /dev/null ||
		bad "podman import debian:12-slim"
	rm -rf "$T/slim"
fi

# --- build the image as a user would ---
start=$(date +%s)
if podman build --isolation=chroot --pull=never -f "$top/k8s/Dockerfile" -t "$tag" "$top" > "$T/build.log" 2>&1; then
	ok
	echo "image: built in $(( $(date +%s) - start )) s"
else
	tail -30 "$T/build.log" >&2
	bad "podman build -f k8s/Dockerfile failed"
	finish
	exit 1
fi
size=$(podman image inspect --format '{{.Size}}' "$tag")
echo "image: $tag is $((size / 1000000)) MB"
[ "$size" -lt 200000000 ] && ok || bad "the image is $((size / 1000000)) MB: keep it under 200 MB"

root=$(podman image mount "$tag") || { bad "podman image mount"; finish; exit 1; }
trap 'podman image umount "$tag" > /dev/null 2>&1; unmount_all' EXIT
for f in usr/local/bin/shardfs usr/local/bin/shardfs-index usr/local/bin/shardfs-check \
	usr/local/bin/shardfs-plan usr/local/bin/shardfs-sidecar sbin/mount.shardfs usr/bin/fusermount3; do
	[ -x "$root/$f" ] && ok || bad "the image lacks /$f"
done
expect_eq "the entrypoint" "$(podman image inspect --format '{{json .Config.Entrypoint}}' "$tag")" '["/usr/local/bin/shardfs-sidecar"]'
# every library the programs need is in the image
missing=$(chroot "$root" sh -c 'for b in /usr/local/bin/shardfs*; do ldd "$b"; done' 2>&1 | grep "not found" || true)
expect_eq "the programs find their libraries" "$missing" ""

# --- a dataset, indexed on the host (the index Job's work) ---
shardfs-mkdata "$T/src" --format tar --shards 6 --samples 5-20 --seed 51 > /dev/null
shardfs-index "$T/src" --quiet
opts=world=2,workers=2,rank=1
# the same view mounted on the host, for the bytes
mount_view "$T/src" "$T/host" "$opts" || bad "mount on the host"
want=$(cd "$T/host" && find 1 -type f -o -type l | sort | xargs cat | sha256sum)
unmount_view "$T/host"

# --- the pod: sidecar and trainer, each its own mount namespace ---
mkdir -p "$T/pod"
# the trainer container: its own mount namespace and root (the same image
# will do), the dataset at the same path (whole shards are symlinks to it),
# the emptyDir HostToContainer (rslave); it reads rank 1 once it is ready
cat > "$T/trainer.sh" <<'SH'
set -u
R=$T/pod/troot
mkdir -p "$T/pod/tupper" "$T/pod/twork" "$R"
mount -t overlay trainer -o "lowerdir=$IMAGE,upperdir=$T/pod/tupper,workdir=$T/pod/twork" "$R"
mkdir -p "$R/data" "$R/mnt/shardfs"
mount --bind "$T/src" "$R/data" && mount -o remount,bind,ro "$R/data"
mount --rbind "$T/pod/empty" "$R/mnt/shardfs"
mount --make-rslave "$R/mnt/shardfs"
for i in $(seq 300); do [ -f "$R/mnt/shardfs/.shardfs-ready" ] && break; sleep 0.1; done
chroot "$R" sh -c 'cd /mnt/shardfs/data && ls && find 1 -type f -o -type l | sort | xargs cat | sha256sum' > "$T/pod/trainer-out"
touch "$T/pod/trainer-done"
for i in $(seq 300); do [ -f "$T/pod/stopped" ] && break; sleep 0.1; done
grep -c " $R/mnt/shardfs/data " /proc/mounts > "$T/pod/trainer-after"
umount -l "$R"
SH
# the pod: the emptyDir, shared; the sidecar container: a writable layer
# over the image, /proc, /dev/fuse, the source read-only, the emptyDir at
# /mnt/shardfs (Bidirectional: rshared), the image's entrypoint
cat > "$T/pod.sh" <<'SH'
set -u
mkdir -p "$T/pod/empty" && mount -t tmpfs emptydir "$T/pod/empty"
mount --make-shared "$T/pod/empty"
R=$T/pod/root
mkdir -p "$T/pod/upper" "$T/pod/work" "$R"
mount -t overlay sidecar -o "lowerdir=$IMAGE,upperdir=$T/pod/upper,workdir=$T/pod/work" "$R"
mount -t proc proc "$R/proc"
mount -t tmpfs dev "$R/dev"
for d in fuse null zero urandom; do touch "$R/dev/$d"; mount --bind "/dev/$d" "$R/dev/$d"; done
mkdir -p "$R/data" "$R/mnt/shardfs" "$R/tmp"
mount --bind "$T/src" "$R/data" && mount -o remount,bind,ro "$R/data"
mount --rbind "$T/pod/empty" "$R/mnt/shardfs"
mount --make-rshared "$R/mnt/shardfs"
unshare -m --propagation unchanged bash "$T/trainer.sh" &
trainer=$!
chroot "$R" env -i PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin \
	SHARDFS_SOURCE=/data SHARDFS_MOUNT=/mnt/shardfs/data \
	SHARDFS_RANK=1 SHARDFS_WORLD=2 SHARDFS_WORKERS=2 \
	/usr/local/bin/shardfs-sidecar 2> "$T/pod/sidecar.log" &
sidecar=$!
for i in $(seq 300); do [ -f "$T/pod/trainer-done" ] && break; kill -0 $sidecar 2>/dev/null || break; sleep 0.1; done
kill -TERM $sidecar
wait $sidecar
echo $? > "$T/pod/sidecar-exit"
grep -c " $R/mnt/shardfs/data " /proc/mounts > "$T/pod/sidecar-after"
touch "$T/pod/stopped"
wait $trainer
umount -l "$R"
SH
IMAGE=$root T=$T unshare -m --propagation private bash "$T/pod.sh"
expect_eq "the trainer sees rank 1 through propagation and reads the bytes of the host's view" \
	"$(cat "$T/pod/trainer-out" 2>/dev/null)" "1
$want"
expect_eq "SIGTERM: the sidecar exits 0" "$(cat "$T/pod/sidecar-exit" 2>/dev/null)" 0
expect_eq "SIGTERM: unmounted in the sidecar" "$(cat "$T/pod/sidecar-after" 2>/dev/null)" 0
expect_eq "SIGTERM: unmounted for the trainer" "$(cat "$T/pod/trainer-after" 2>/dev/null)" 0
[ "$(cat "$T/pod/sidecar-exit" 2>/dev/null)" = 0 ] || cat "$T/pod/sidecar.log" >&2
finish
