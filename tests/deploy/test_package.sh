#!/usr/bin/env bash
# The Debian package: shardfs_VERSION_amd64.deb built from the tree as the
# README says (Release, -DCMAKE_INSTALL_PREFIX=/usr, cpack), its Depends and
# its files; installed with apt-get into a clean Debian 12 root (an overlay
# on the test's debootstrap root, chrooted), which brings what it depends
# on; there `mount -t fuse.shardfs` and `mount -t shardfs` serve views
# that shardfs-check audits, and umount takes them down; then purged, with
# the dependencies it brought, and nothing of it is left.
#
# The whole test runs in a private mount namespace of its own: whatever it
# mounts, and does not unmount by path first, goes with it.
if [ -z "${SHARDFS_TEST_NS:-}" ]; then
	exec bash "$(dirname "$0")/../private_ns.sh" env SHARDFS_TEST_NS=1 bash "$0" "$@"
fi
. "$(dirname "$0")/lib.sh"
deb=shardfs_${VERSION}_amd64.deb
pkgbuild=$BUILD/deb
r=$T/root

cleanup() {
	local m
	for m in "$r/mnt/view" "$r/dev/null" "$r/dev/zero" "$r/dev/urandom" \
		"$r/dev/fuse" "$r/dev" "$r/proc" "$r"; do
		mountpoint -q "$m" && umount "$m"
	done
	wait
	rm -rf --one-file-system "$T"
}
trap cleanup EXIT

need_debs debootstrap dpkg-dev
make_base

echo "building $deb in $pkgbuild"
if ! { cmake -S "$TESTS/.." -B "$pkgbuild" -DCMAKE_BUILD_TYPE=Release \
	-DCMAKE_INSTALL_PREFIX=/usr -DSHARDFS_TESTS=OFF &&
	cmake --build "$pkgbuild" -j "$(nproc)" &&
	(cd "$pkgbuild" && cpack); } > "$T/build.log" 2>&1; then
	tail -20 "$T/build.log" >&2
	die "building the package in $pkgbuild failed (above)"
fi
expect_eq "the package: Depends" "$(dpkg-deb -f "$pkgbuild/$deb" Depends)" \
	"fuse3, libarchive13 (>= 3.0.4), libbrotli1 (>= 0.6.0), libc6 (>= 2.34), libfuse3-3 (>= 3.12.0), libjansson4 (>= 2.14), liblz4-1 (>= 0.0~r130), libsnappy1v5 (>= 1.1.9), libssl3 (>= 3.0.0), libzstd1 (>= 1.5.2), zlib1g (>= 1:1.1.4)"
# the programs, man pages, the mount helper and the unit; no test programs
expect_eq "the package: files" "$(dpkg-deb -c "$pkgbuild/$deb" | awk '$6 !~ /\/$/ { print $6 }')" \
	"./sbin/mount.shardfs
./usr/bin/shardfs
./usr/bin/shardfs-check
./usr/bin/shardfs-index
./usr/bin/shardfs-mkdata
./usr/bin/shardfs-plan
./usr/bin/shardfs-sidecar
./usr/lib/systemd/system/shardfs@.service
./usr/share/man/man1/shardfs-check.1.gz
./usr/share/man/man1/shardfs-index.1.gz
./usr/share/man/man1/shardfs-mkdata.1.gz
./usr/share/man/man1/shardfs-plan.1.gz
./usr/share/man/man1/shardfs.1.gz"

# the clean root: the debootstrap root under a writable layer
. "$TESTS/deploy/rootfs.sh"
container_root "$base" "$T"
in_root() {
	chroot "$r" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
		DEBIAN_FRONTEND=noninteractive "$@"
}
# every path of the root but the ones apt and dpkg keep their records in
paths() {
	(cd "$r" && find . -xdev ! -path './proc/*' ! -path './dev/*' ! -path './tmp/*' \
		! -path './var/log/*' ! -path './var/cache/*' ! -path './var/lib/apt/*' \
		! -path './var/lib/dpkg/*' | sort)
}
in_root apt-get update -qq > "$T/apt.log" 2>&1 ||
	{ cat "$T/apt.log" >&2; die "apt-get update in the Debian 12 root failed (above)"; }
paths > "$T/before"

cp "$pkgbuild/$deb" "$r/tmp/"
in_root apt-get install -y -qq --no-install-recommends "/tmp/$deb" > "$T/apt.log" 2>&1 ||
	{ cat "$T/apt.log" >&2; die "apt-get install of $deb in the Debian 12 root failed (above)"; }
expect_eq "installed" "$(in_root dpkg-query -W -f='${Status} ${Version}' shardfs)" \
	"install ok installed $VERSION"
expect_eq "the unit runs the installed daemon" \
	"$(grep '^ExecStart=' "$r/usr/lib/systemd/system/shardfs@.service")" \
	'ExecStart=/usr/bin/shardfs ${SHARDFS_SOURCE} ${SHARDFS_MOUNT} -f -o ${SHARDFS_OPTIONS}'

in_root shardfs-mkdata /srv/train --format tar --shards 6 --samples 5-20 --seed 61 > /dev/null
in_root shardfs-index /srv/train --quiet
mkdir -p "$r/mnt/view"

# mount -t fuse.shardfs: mount.fuse3 (fuse3, a Depends) runs shardfs
in_root mount -t fuse.shardfs /srv/train /mnt/view -o world=2,workers=2
expect_eq "mount -t fuse.shardfs" "$?:$(grep -c " $r/mnt/view fuse.shardfs " /proc/self/mounts)" "0:1"
expect_eq "mount -t fuse.shardfs: the view" "$(in_root ls /mnt/view | tr '\n' ' ')" "0 1 "
out=$(in_root shardfs-check view /mnt/view 2>&1) && ok ||
	bad "shardfs-check view of the mount -t fuse.shardfs view: $out"
in_root umount /mnt/view
expect_eq "umount" "$?:$(grep -c " $r/mnt/view " /proc/self/mounts)" "0:0"

# mount -t shardfs: mount(8) finds mount.shardfs where the package put it
in_root mount -t shardfs /srv/train /mnt/view -o world=2,workers=2,rank=1
expect_eq "mount -t shardfs: the view" "$?:$(in_root ls /mnt/view /mnt/view/1 | tr '\n' ' ')" \
	"0:/mnt/view: 1  /mnt/view/1: 0 1 "
in_root umount /mnt/view
expect_eq "umount" "$?:$(grep -c " $r/mnt/view " /proc/self/mounts)" "0:0"
rm -rf "$r/srv/train" "$r/mnt/view" "$r/tmp/$deb"

# purged with what it brought: the root is as it was
in_root apt-get purge -y -qq --autoremove shardfs > "$T/apt.log" 2>&1 ||
	{ cat "$T/apt.log" >&2; die "apt-get purge of shardfs failed (above)"; }
expect_eq "purged" "$(in_root dpkg-query -W -f='${Status}' shardfs 2>&1)" \
	"dpkg-query: no packages found matching shardfs"
expect_eq "nothing left" "$(paths | diff "$T/before" - )" ""
finish
