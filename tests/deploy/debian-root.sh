#!/usr/bin/env bash
# debian-root.sh DIR: a minimal Debian 12 root file system in DIR, made by
# debootstrap from the apt mirror this machine is configured with, and
# cached: a second call finds it made.  The image and package tests start
# from it.  Prints DIR.
set -euo pipefail
root=$1
if [ ! -e "$root/.shardfs-complete" ]; then
	command -v debootstrap > /dev/null || {
		echo "debian-root: debootstrap is not installed (apt-get install debootstrap)" >&2
		exit 2
	}
	mirror=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)
	[ -n "$mirror" ] || mirror=$(awk '$1 == "deb" && $3 == "bookworm" {print $2; exit}' /etc/apt/sources.list 2>/dev/null)
	[ -n "$mirror" ] || { echo "debian-root: no Debian mirror configured in /etc/apt" >&2; exit 2; }
	rm -rf "$root"
	mkdir -p "$(dirname "$root")"
	debootstrap --variant=minbase bookworm "$root" "$mirror" > "$root.log" 2>&1 || {
		tail -20 "$root.log" >&2
		echo "debian-root: debootstrap from $mirror failed (log: $root.log)" >&2
		exit 2
	}
	# the same package sources as this machine, for apt-get inside; no
	# package lists or downloaded packages left behind, as in Debian's
	# own container images
	cp /etc/apt/sources.list.d/debian.sources "$root/etc/apt/sources.list.d/" 2>/dev/null || true
	rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
	touch "$root/.shardfs-complete"
fi
echo "$root"
