#!/usr/bin/env bash
# private_ns.sh CMD [ARG...]: run CMD in a mount namespace of its own
# (unshare -m --propagation private: what it mounts is seen nowhere else),
# without the shardfs views mounted when it starts.  A new namespace holds
# a copy of every mount there is, and a copy of a view keeps the view's
# connection, so its daemon, alive after the test that mounted it unmounts
# it, until the namespace ends: that test, run beside this one, would wait
# for its daemon to exit as long (30 s and more: a deployment test's
# namespace lives minutes).
exec unshare -m --propagation private bash -c '
	awk '\''$3 == "fuse.shardfs" { print $2 }'\'' /proc/self/mounts |
		sort -r | while read -r m; do
			umount -l "$(printf "%b" "$m")"
		done
	exec "$@"' private_ns.sh "$@"
