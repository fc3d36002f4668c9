# Shared by the deployment tests (image, package): the checks, tally and
# mounts of tests/mount/lib.sh, root, and a cached Debian 12 root file
# system.
. "$(dirname "${BASH_SOURCE[0]}")/../mount/lib.sh"
[ "$(id -u)" -eq 0 ] || { bad "the deployment tests need root"; finish; exit 1; }
CACHE=${SHARDFS_TEST_CACHE:-/var/cache/shardfs-test}
DEBIAN_ROOT=$CACHE/bookworm

# need_packages PKG...: install the Debian packages a test needs, or fail
# saying which could not be had
need_packages() {
	local missing=() p
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" > "$T/apt.log" 2>&1 ||
		DEBIAN_FRONTEND=noninteractive apt-get update -qq > /dev/null 2>&1 &&
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" > "$T/apt.log" 2>&1 || {
		tail -5 "$T/apt.log" >&2
		bad "cannot install ${missing[*]} from Debian's packages: this test needs them"
		finish
		exit 1
	}
}

# debian_root: the cached minimal Debian 12 root (debootstrap), made if
# missing
debian_root() {
	bash "$TESTS/deploy/debian-root.sh" "$DEBIAN_ROOT" > /dev/null || {
		bad "cannot make a Debian 12 root with debootstrap"
		finish
		exit 1
	}
}
