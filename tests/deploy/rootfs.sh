# container_root LOWER SCRATCH: mount, at SCRATCH/root, the read-only root
# file system LOWER (an image's, or the test's Debian root) under a
# writable overlay in SCRATCH, with /proc and a /dev holding null, zero,
# urandom and the fuse device (what a privileged pod's /dev offers); in
# the caller's mount namespace.  Sourced by container.sh and the package
# test.
container_root() {
	local lower=$1 scratch=$2 r=$2/root dev
	mkdir -p "$scratch/upper" "$scratch/work" "$r"
	mount -t overlay overlay \
		-o "lowerdir=$lower,upperdir=$scratch/upper,workdir=$scratch/work" "$r"
	mount -t proc proc "$r/proc"
	mount -t tmpfs -o mode=755 dev "$r/dev"
	for dev in null zero urandom fuse; do
		touch "$r/dev/$dev"
		mount --bind "/dev/$dev" "$r/dev/$dev"
	done
}
