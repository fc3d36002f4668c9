#!/usr/bin/env bash
# follow=1 (docs/follow.md): the daemon stopped (SIGTERM) while a parked
# read is being answered aside from a source that never answers (slowfs
# stopped, never resumed).  A review found the daemon waiting for that
# answer without limit: it never exited, and the mount stayed.  Here it
# waits 5 seconds, as the prefetcher waits for its reads, then unmounts
# and exits 0 with a log line saying why; the reader gets an error, not
# bytes.  The source and the parked reader: parked_lib.sh.  Mounts and
# unmounts (tests/lib.sh).
. "$(dirname "$0")/../../lib.sh"
. "$(dirname "$0")/parked_lib.sh"

parked_start
expect_eq "the reply of window 0 waits for its source" \
	"$(wc -c < "$T/a.out")" 0
# the daemon told to stop while the answer waits; the source never answers
t0=$(date +%s.%N)
kill -TERM "${daemon_pid[$M]}"
pid=${daemon_pid[$M]}
for i in $(seq 300); do
	kill -0 "$pid" 2>/dev/null || break
	sleep 0.1
done
t1=$(date +%s.%N)
if kill -0 "$pid" 2>/dev/null; then
	bad "the daemon still runs 30 s after SIGTERM (it waits for the stalled source)"
else
	wait "$pid"
	expect_eq "the daemon exits 0" "$?" 0
	secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%d", b - a}')
	if [ "$secs" -ge 5 ] && [ "$secs" -lt 15 ]; then
		ok
	else
		bad "the daemon exited after $secs s, want 5 to 15 (its bound: 5 s)"
	fi
fi
expect_eq "the exit says why it did not wait" \
	"$(grep -c "^shardfs: exiting while reads of a followed source answered aside still wait for the stalled source: they end with the process$" "${daemon_log[$M]}")" 1
# (bounded: a daemon that never exits leaves a mount nobody answers)
if timeout 10 mountpoint -q "$M"; then
	bad "the mount stays after the daemon exited"
else
	ok
fi
wait "$reader"
rc=$?
expect_eq "the reader gets no byte" "$(wc -c < "$T/a.out")" 0
if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ]; then
	ok
else
	bad "the reader exits $rc, want an error (not 0, not timeout's 124)"
fi
expect_clean_log "$M"
kill -CONT "$slow_pid"
parked_end
finish
