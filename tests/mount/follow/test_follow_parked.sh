#!/usr/bin/env bash
# follow=1 (docs/follow.md): a read of a stream parked past its end is
# answered, once its bytes come, on a thread of its own.  A review found
# it answered on the watcher's thread, so that a reply waiting for a slow
# source (its splice reads the shard) held back the next window.  Here a
# reader parked for window 0 waits for its stopped source
# (parked_lib.sh), and the next window must appear all the same.  Mounts
# and unmounts (tests/lib.sh).
. "$(dirname "$0")/../../lib.sh"
. "$(dirname "$0")/parked_lib.sh"

parked_start
expect_eq "window 1 comes while the reply of window 0 waits for its source" \
	"$(ls "$W")" "stream.jsonl
window-00000000.jsonl
window-00000001.jsonl"
expect_eq "the reply waits" "$(wc -c < "$T/a.out")" 0
kill -CONT "$slow_pid"
wait "$reader"
expect_eq "the reader's read, answered once the source answers" \
	"$(cat "$T/a.out")" '{"id": 0}
{"id": 1}'
unmount_view "$M"
parked_end
finish
