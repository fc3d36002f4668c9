# Shared by the end-to-end scripts: DDP jobs (ddp.py) on one mount per
# rank, checked by check_ddp.py, and the tar datasets they read.
. "$(dirname "${BASH_SOURCE[0]}")/../../lib.sh"
PY=/usr/bin/python3
E=$TESTS/python/e2e

# run NAME CMD...: the command's output shown; status 0 expected
run() {
	local name=$1 out rc
	shift
	out=$("$@" 2>&1)
	rc=$?
	printf '%s\n' "$out" | grep -v -e '^FAIL' -e '^$' | sed "s/^/  [$name] /"
	expect_eq "$name" "$rc" 0 || printf '%s\n' "$out" | tail -20 >&2
}

# ddp NAME SRC OPTIONS EPOCHS [STEPS]: one mount per rank, the job, unmount;
# $DDP_ARGS are added to ddp.py's command line (e.g. --recipe webdataset)
ddp() {
	local name=$1 src=$2 opts=$3 epochs=$4 steps=${5:-} out=$T/$1 r world mnts=()
	world=$(sed -E 's/.*world=([0-9]+).*/\1/' <<<"$opts")
	mkdir -p "$out"
	for r in $(seq 0 $((world - 1))); do
		mount_view "$src" "$T/mnt-$name-$r" "rank=$r,$opts" || bad "$name: mount rank $r"
		mnts+=("$T/mnt-$name-$r")
	done
	run "$name job" timeout 600 $PY "$E/ddp.py" --world "$world" \
		--workers "$(sed -E 's/.*workers=([0-9]+).*/\1/' <<<"$opts")" \
		--batch "$(sed -E 's/.*batch=([0-9]+).*/\1/' <<<"$opts")" \
		--mounts "$(IFS=,; echo "${mnts[*]}")" --epochs "$epochs" \
		--out "$out" ${steps:+--steps "$steps"} ${DDP_ARGS:-}
	[ -n "$steps" ] || run "$name check" $PY "$E/check_ddp.py" job "$src" "$out" "$opts" "$epochs" "${mnts[@]}"
	if [ "$name" = ddp-w2 ]; then # the check can fail: another seed's plan
		expect_eq "$name checked against seed=1 fails" "$($PY "$E/check_ddp.py" job "$src" "$out" "$opts,seed=1" "$epochs" "${mnts[@]}" | grep -c '^FAIL: epoch [01] rank [01] batch 0 is')" 4
	fi
	for r in "${mnts[@]}"; do unmount_view "$r"; done
}

# ddp_jobs: the DDP jobs every loader must pass (with $DDP_ARGS choosing
# the loader): even and uneven data, pad and drop, and an epoch stopped at
# world=4 and finished at world=2
ddp_jobs() {
	local a b
	ddp ddp-w2 "$T/even" "world=2,workers=2,batch=4" 0,1
	ddp ddp-w4-pad "$T/uneven" "world=4,workers=2,batch=4,remainder=pad" 0,1
	ddp ddp-w4-drop "$T/uneven" "world=4,workers=2,batch=4,remainder=drop,block=16,shuffle=samples,seed=7" 2,3
	# elastic: world=4 stops after 3 steps of epoch 5; world=2 finishes it
	a="world=4,workers=2,batch=4,partition=interleaved"
	b="world=2,workers=2,batch=4,partition=interleaved,start=$((3 * 4 * 4))"
	ddp elastic-a "$T/uneven" "$a" 5 3
	ddp elastic-b "$T/uneven" "$b" 5
	run "elastic resume" $PY "$E/check_ddp.py" elastic "$T/uneven" "$T/elastic-a" "$a" 3 "$T/elastic-b" "$b" 5
}

# e2e_data: $T/even, 12 shards of 20-40 samples; and $T/uneven, 11 shards
# whose sizes vary 10x, 297 samples in all: not a multiple of world x
# workers x batch = 32, nor of 8; both indexed
e2e_data() {
	mkdir -p "$T/even" "$T/uneven"
	$PY "$E/make_tars.py" "$T/even" 24 31 20 37 28 40 22 35 26 33 29 21
	$PY "$E/make_tars.py" "$T/uneven" 6 60 13 41 8 55 17 29 9 47 12
	shardfs-index "$T/even" --quiet
	shardfs-index "$T/uneven" --quiet
}
