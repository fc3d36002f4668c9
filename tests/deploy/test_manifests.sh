#!/usr/bin/env bash
# The k8s/ manifests against the Kubernetes API schemas and the Dockerfile
# through a linter, offline once the two npm packages are installed (from
# the npm registry, pinned, into the build directory), plus the rules every
# shardfs sidecar must follow; and a broken copy must fail.
set -euo pipefail
BUILD=$1
TESTS=$2
npmdir=$BUILD/k8s-npm
if [ ! -d "$npmdir/node_modules/kubernetes-models" ]; then
	mkdir -p "$npmdir"
	(cd "$npmdir" && npm init -y > /dev/null &&
		npm install --no-audit --no-fund --loglevel=error \
			kubernetes-models@4.5.1 yaml@2.9.1 dockerfile-utils@0.16.3 > /dev/null)
fi
export NODE_PATH=$npmdir/node_modules
node "$TESTS/deploy/validate_manifests.js" "$TESTS/../k8s"

# the checks can fail: a sidecar without Bidirectional propagation, a
# container whose name is not a string, a bucket mount that does not
# propagate to shardfs
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cp "$TESTS"/../k8s/sidecar-pod.yaml "$TESTS"/../k8s/index-parts-job.yaml \
	"$TESTS"/../k8s/s3-sidecar-pod.yaml "$T/"
sed -i 's/mountPropagation: Bidirectional/mountPropagation: None/; s/name: trainer$/name: 7/' "$T/sidecar-pod.yaml"
sed -i 's/completions: 8/completions: 6/' "$T/index-parts-job.yaml"
# the bucket's mount does not propagate out of the s3fs sidecar
sed -i '0,/mountPropagation: Bidirectional/s//mountPropagation: None/' "$T/s3-sidecar-pod.yaml"
if out=$(node "$TESTS/deploy/validate_manifests.js" "$T"); then
	echo "FAIL: a broken manifest passed"; echo "$out"; exit 1
fi
grep -q "FAIL: sidecar-pod.yaml Pod/trainer-rank-0: schema: data/spec/containers/0/name must be string" <<<"$out" &&
	grep -q "FAIL: sidecar-pod.yaml Pod/trainer-rank-0: sidecar mount is Bidirectional" <<<"$out" &&
	grep -q "FAIL: index-parts-job.yaml Job/shardfs-index-parts: index indexes 8 parts, one per completion: completions is 6, --part says 8" <<<"$out" &&
	grep -q "FAIL: s3-sidecar-pod.yaml Pod/trainer-s3-rank-0: shardfs sees the mount of volume bucket: no native sidecar with a startup probe before it mounts bucket Bidirectional" <<<"$out" ||
	{ echo "FAIL: the broken manifest's faults were not named:"; echo "$out"; exit 1; }
echo "the broken copy fails as it should"
