#!/usr/bin/env bash
# follow=1 (docs/follow.md): the daemon stopped (SIGTERM) while a parked
# read is being answered aside.  A review found the views freed at the end
# of the session loop while that answer, waiting for a slow source, still
# used its view: the answer read freed memory once the source answered.
# Here the answer must wait for its source (parked_lib.sh) and give the
# reader its bytes, and the daemon exit 0 with a clean log (a sanitizer
# build reports the use after free).  Mounts and unmounts (tests/lib.sh).
. "$(dirname "$0")/../../lib.sh"
. "$(dirname "$0")/parked_lib.sh"

parked_start
expect_eq "the reply of window 0 waits for its source" \
	"$(wc -c < "$T/a.out")" 0
# the daemon told to stop while the answer waits; the source answers after
kill -TERM "${daemon_pid[$M]}"
sleep 1
kill -CONT "$slow_pid"
wait "$reader"
expect_eq "the reader's read, answered once the source answers" \
	"$(cat "$T/a.out")" '{"id": 0}
{"id": 1}'
wait "${daemon_pid[$M]}"
expect_eq "the daemon exits 0" "$?" 0
expect_clean_log "$M"
parked_end
finish
