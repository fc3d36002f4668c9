#!/usr/bin/env bash
# container.sh ROOT SCRATCH VOLUME... -- [NAME=VALUE...] CMD...
#
# Runs CMD as a container runtime runs a container of the image whose root
# file system is ROOT (podman image mount), in the mount namespace it is
# started in -- start it under `unshare -m`, so that everything it mounts
# goes with the namespace: ROOT read-only under a writable layer (an
# overlay on a tmpfs at SCRATCH), /proc, a /dev with null, zero, urandom
# and the fuse device (what a privileged pod's /dev offers the sidecar),
# and the volumes, each KIND:HOSTDIR:DIR with KIND
#   ro             a read-only bind mount (the dataset)
#   rw             a bind mount
#   bidirectional  an rshared bind mount (mountPropagation: Bidirectional)
# CMD runs chrooted, with only the NAME=VALUE environment and the PATH of
# a Debian image; it replaces this script (same process id).
set -euo pipefail
root=$1
scratch=$2
shift 2
. "$(dirname "$0")/rootfs.sh"
mkdir -p "$scratch"
mount -t tmpfs container "$scratch"
container_root "$root" "$scratch"
r=$scratch/root
while [ "$1" != -- ]; do
	IFS=: read -r kind host dir <<< "$1"
	mkdir -p "$r$dir"
	case $kind in
	ro) mount --bind -o ro "$host" "$r$dir" ;;
	rw) mount --bind "$host" "$r$dir" ;;
	bidirectional)
		mount --rbind "$host" "$r$dir"
		mount --make-rshared "$r$dir"
		;;
	*)
		echo "container.sh: volume $1: the kind must be ro, rw or bidirectional" >&2
		exit 2
		;;
	esac
	shift
done
shift
env=()
while [[ "$1" == *=* ]]; do
	env+=("$1")
	shift
done
exec env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
	"${env[@]}" chroot "$r" "$@"
