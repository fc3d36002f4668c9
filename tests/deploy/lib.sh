# Shared by the deployment tests (test_image.sh, test_package.sh,
# test_wheel.sh): the Debian 12 root they start from, made once with
# debootstrap from the machine's apt mirror and kept in $SHARDFS_TEST_CACHE
# [/var/cache/shardfs-test] for the next run, and the Debian packages they
# need, installed with apt-get -- or the test fails saying so.
# Arguments: BUILD TESTS VERSION (the project's version, from ctest).
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
VERSION=$3
cache=${SHARDFS_TEST_CACHE:-/var/cache/shardfs-test}
base=$cache/debian-12-minbase

die() {
	printf 'FAIL: %s\n' "$*" >&2
	exit 1
}

# need_debs PKG...: install the packages that are missing
need_debs() {
	local missing=() p
	for p; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
			missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	echo "installing ${missing[*]} from Debian's packages"
	if ! { apt-get update -qq &&
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			--no-install-recommends "${missing[@]}"; } > "$T/apt.log" 2>&1; then
		tail -5 "$T/apt.log" >&2
		die "cannot install ${missing[*]} with apt-get (above): this test needs them; check the apt sources in /etc/apt/sources.list*"
	fi
}

# make_base: $base, a minbase Debian 12 root, unless the cache has it
# (its stamp $base.done says it is whole); one test at a time makes it
make_base() {
	local mirror
	mkdir -p "$cache"
	exec {lock}> "$cache/.lock"
	flock "$lock"
	if [ ! -e "$base.done" ]; then
		mirror=$(apt-get indextargets --no-release-info \
			--format '$(REPO_URI) $(RELEASE) $(TARGET_OF)' |
			awk '$2 == "bookworm" && $3 == "deb" { print $1; exit }')
		[ -n "$mirror" ] ||
			die "no Debian 12 (bookworm) mirror in /etc/apt/sources.list*: add one, the test's Debian root is made from it"
		echo "debootstrap --variant=minbase bookworm $base $mirror"
		rm -rf --one-file-system "$base"
		if ! debootstrap --variant=minbase bookworm "$base" "$mirror" \
			> "$cache/debootstrap.log" 2>&1; then
			tail -5 "$cache/debootstrap.log" >&2
			die "debootstrap from $mirror failed (above; the log is $cache/debootstrap.log)"
		fi
		rm -f "$base"/var/cache/apt/archives/*.deb
		touch "$base.done"
	fi
	flock -u "$lock"
}

# make_root NAME PKG...: $cache/debian-12-NAME, the base root with the
# Debian packages PKG installed by apt-get, unless the cache has it (its
# stamp $cache/debian-12-NAME.done); made in the caller's mount namespace
# (a private one: /proc and /dev are lent to apt there, and go with it)
make_root() {
	local name=$1 dir=$cache/debian-12-$1
	shift
	make_base
	flock "$lock"
	if [ ! -e "$dir.done" ]; then
		echo "making $dir: debian-12-minbase with $*"
		rm -rf --one-file-system "$dir"
		cp -a "$base" "$dir"
		mount -t proc proc "$dir/proc"
		mount --bind /dev "$dir/dev"
		if ! chroot "$dir" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
			DEBIAN_FRONTEND=noninteractive sh -c \
			'apt-get update -qq && apt-get install -y -qq --no-install-recommends "$@"' \
			sh "$@" > "$cache/$name.log" 2>&1; then
			umount "$dir/dev" "$dir/proc"
			tail -5 "$cache/$name.log" >&2
			die "installing $* into $dir failed (above; the log is $cache/$name.log)"
		fi
		umount "$dir/dev" "$dir/proc"
		rm -rf "$dir"/var/lib/apt/lists/* "$dir"/var/cache/apt/archives/*.deb
		touch "$dir.done"
	fi
	flock -u "$lock"
}
