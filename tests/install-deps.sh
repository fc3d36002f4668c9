#!/usr/bin/env bash
# Install what shardfs needs to build and test, from Debian 12 packages.
# Quiet and quick when everything is there already.
set -euo pipefail
packages=(build-essential cmake pkg-config libfuse3-dev fuse3 libarchive-dev
	libarchive-tools libssl-dev libjansson-dev libcmocka-dev python3
	zlib1g-dev libsnappy-dev libzstd-dev liblz4-dev libbrotli-dev
	clang-format tar coreutils attr util-linux gzip bzip2 xz-utils zstd
	clang libclang-rt-14-dev help2man man-db
	python3-torch python3-torchvision valgrind
	# the threads shardfs-index starts (tests/cli/test_tools.sh)
	strace
	# what the benchmarks call (tests/bench/; smoke.sh runs each in CI)
	fio time
	# WebDataset's dependencies (tests/python/e2e/test_webdataset.sh; WebDataset
	# itself is not in Debian)
	python3-braceexpand python3-numpy python3-yaml
	# the Python suites' virtual environments (tests/python/venv.sh)
	python3-venv
	# a dataset in an S3 bucket (tests/mount/s3/test_bucket.sh; its server,
	# versitygw, is built from its Go module by tests/mount/s3/versitygw.sh)
	s3fs rclone)
missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
		missing+=("$p")
done
# node and npm (the manifests' schema check) from wherever they come
command -v node > /dev/null && command -v npm > /dev/null || missing+=(nodejs npm)
if [ ${#missing[@]} -gt 0 ]; then
	[ "$(id -u)" -eq 0 ] || { echo "install-deps: run as root to install: ${missing[*]}" >&2; exit 2; }
	echo "install-deps: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
