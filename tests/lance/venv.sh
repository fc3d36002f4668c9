# Sourced by the Lance tests: lance_venv TESTS sets $lance_py to the python
# of a venv of Debian's /usr/bin/python3 holding tests/lance/requirements.txt
# (pylance, pinned), made once per version of that file under
# $SHARDFS_TEST_CACHE [/var/cache/shardfs-test]/venv-lance-<hash>, with pip's
# cache beside it.  About 100 MB from PyPI the first time.
lance_venv() {
	local cache=${SHARDFS_TEST_CACHE:-/var/cache/shardfs-test} req hash venv
	req=$1/lance/requirements.txt
	hash=$(sha256sum "$req" | cut -c1-16)
	venv=$cache/venv-lance-$hash
	lance_py=$venv/bin/python
	[ -f "$venv/.done" ] && return 0
	[ -x /usr/bin/python3 ] ||
		{ echo "FAIL: /usr/bin/python3 is needed (bash tests/install-deps.sh)"; return 1; }
	mkdir -p "$cache"
	rm -rf "$venv"
	/usr/bin/python3 -m venv "$venv" &&
		"$venv/bin/pip" install -q --disable-pip-version-check \
			--cache-dir "$cache/pip" -r "$req" ||
		{ echo "FAIL: cannot install $req into $venv (pip, above)"; return 1; }
	touch "$venv/.done"
}
