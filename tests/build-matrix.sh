#!/usr/bin/env bash
# Build shardfs (and its tests) with gcc and clang at every CMake build
# type, warnings as errors, and once more as Debian packagers do (the
# hardening flags of dpkg-buildflags).  Compiles only; tests/run-all.sh runs
# it so that a warning that a user's build type would hit fails CI.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
failed=0

build() { # name, compiler, cmake arguments
	local name=$1 cc=$2
	shift 2
	if CC=$cc cmake -S "$top" -B "$out/$name" -DSHARDFS_WERROR=ON "$@" \
		>"$out/$name.log" 2>&1 &&
		cmake --build "$out/$name" -j "$(nproc)" >>"$out/$name.log" 2>&1; then
		echo "build-matrix: $name ok"
	else
		echo "build-matrix: $name FAILED:" >&2
		grep -E 'warning:|error:' "$out/$name.log" | head -20 >&2 ||
			tail -20 "$out/$name.log" >&2
		failed=1
	fi
	rm -rf "${out:?}/$name"
}

for cc in gcc clang; do
	for type in Debug Release RelWithDebInfo MinSizeRel; do
		build "$cc-$type" "$cc" -DCMAKE_BUILD_TYPE=$type
	done
done
# digest.c on OpenSSL's EVP calls alone, as where its deprecated
# SHA256_CTX calls are compiled out: built, and its known answers checked
if CFLAGS=-DOPENSSL_NO_DEPRECATED cmake -S "$top" -B "$out/evp" \
	-DSHARDFS_WERROR=ON >"$out/evp.log" 2>&1 &&
	cmake --build "$out/evp" -j "$(nproc)" --target test_digest \
		>>"$out/evp.log" 2>&1 &&
	ctest --test-dir "$out/evp" -R '^unit_digest$' >>"$out/evp.log" 2>&1; then
	echo "build-matrix: gcc-openssl-evp unit_digest ok"
else
	echo "build-matrix: gcc-openssl-evp FAILED:" >&2
	tail -20 "$out/evp.log" >&2
	failed=1
fi
rm -rf "${out:?}/evp"
# as dpkg-buildpackage builds, hardening on
export DEB_BUILD_MAINT_OPTIONS=hardening=+all
CFLAGS="$(dpkg-buildflags --get CFLAGS) $(dpkg-buildflags --get CPPFLAGS)" \
	LDFLAGS="$(dpkg-buildflags --get LDFLAGS)" \
	build gcc-dpkg-buildflags gcc -DCMAKE_BUILD_TYPE=None
exit $failed
