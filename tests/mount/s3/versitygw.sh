#!/usr/bin/env bash
# versitygw.sh: print the path of versitygw (a POSIX-backed S3 gateway),
# built from its Go module at the pinned version with the Go toolchain on
# PATH or in /usr/local/go, where this kind of machine has it (1.25 or
# newer, what its go.mod asks), once, under
# /var/cache/shardfs-test/versitygw-VERSION (its module and build caches
# beside it, go-mod and go-build), so that a second run builds nothing.  A
# failed build is an error (exit 2), never a skip.
set -euo pipefail
version=v1.8.0
cache=/var/cache/shardfs-test
dir=$cache/versitygw-$version
PATH=$PATH:/usr/local/go/bin
mkdir -p "$cache"
exec 9>"$dir.lock"
flock 9
if [ ! -x "$dir/versitygw" ]; then
	command -v go > /dev/null || {
		echo "versitygw.sh: no go on PATH: install Go 1.25 or newer (Debian 12's golang-go, 1.19, is too old) to build versitygw $version" >&2
		exit 2
	}
	start=$(date +%s)
	echo "versitygw.sh: building versitygw $version into $dir" >&2
	rm -rf "$dir.tmp"
	mkdir -p "$dir.tmp"
	if ! GOBIN=$dir.tmp GOMODCACHE=$cache/go-mod GOCACHE=$cache/go-build \
		GOFLAGS=-modcacherw nice go install \
		"github.com/versity/versitygw/cmd/versitygw@$version" >&2; then
		rm -rf "$dir.tmp"
		echo "versitygw.sh: could not build versitygw $version with $(go version) (see above; it needs Go 1.25 or newer): the test fails" >&2
		exit 2
	fi
	rm -rf "$dir"
	mv "$dir.tmp" "$dir"
	echo "versitygw.sh: built in $(($(date +%s) - start)) s" >&2
fi
echo "$dir/versitygw"
