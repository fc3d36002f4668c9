#!/usr/bin/env bash
# venv.sh REQUIREMENTS: print the path of a virtual environment that holds
# exactly REQUIREMENTS (every package pinned with ==), built from Debian's
# /usr/bin/python3 with its site packages visible (python3-torch 1.13,
# numpy; not when the file has the line "# venv: isolated") under /var/cache/shardfs-test/, keyed by a hash of the file, so
# that a second run installs nothing.  Wheels are kept in
# /var/cache/shardfs-test/wheels: an environment built again (another
# requirements file, a new Python) installs offline from them.  A failed install is an error (exit 2),
# never a skip; the half-built environment is removed.
# venv.sh --built REQUIREMENTS: print the path only if that environment is
# already built (exit 1 otherwise): for runs that must not install.
set -euo pipefail
built_only=
[ "$1" = --built ] && { built_only=1; shift; }
req=$1
cache=/var/cache/shardfs-test
key=$(cat "$req" <(/usr/bin/python3 -VV) | sha256sum | cut -c1-16)
venv=$cache/venv-$(basename "$req" .txt)-$key
mkdir -p "$cache"
if [ -n "$built_only" ]; then
	[ -e "$venv/.complete" ] && echo "$venv"
	[ -e "$venv/.complete" ]
	exit
fi
exec 9>"$venv.lock"
flock 9
# install VENV REQ: from the wheels kept in $cache/wheels, offline; what
# is not there yet is downloaded into it first
install() {
	local pip=("$1/bin/pip" --disable-pip-version-check)
	"${pip[@]}" install -q --no-deps --no-index --find-links "$cache/wheels" \
		-r "$2" 2> /dev/null && return 0
	"${pip[@]}" download -q --no-deps -d "$cache/wheels" -r "$2" &&
		"${pip[@]}" install -q --no-deps --no-index \
			--find-links "$cache/wheels" -r "$2"
}
if [ ! -e "$venv/.complete" ]; then
	rm -rf "$venv"
	start=$(date +%s)
	echo "venv.sh: building $venv from $req" >&2
	site=--system-site-packages
	# "# venv: isolated": without Debian's packages (other numpy, no torch)
	grep -qx "# venv: isolated" "$req" && site=
	if ! /usr/bin/python3 -m venv $site "$venv" >&2 ||
		! install "$venv" "$req" >&2 ||
		! "$venv/bin/python" - "$req" <<-'PY' >&2; then
			# pip check, for the packages of REQUIREMENTS only (Debian's own
			# have their own gaps: pygobject wants pycairo)
			import re, subprocess, sys
			ours = {re.split("[=<>]", l)[0].strip().lower().replace("_", "-")
			        for l in open(sys.argv[1]) if l.strip() and l[0] != "#"}
			out = subprocess.run([sys.executable, "-m", "pip", "check"],
			                     capture_output=True, text=True).stdout
			bad = [l for l in out.splitlines()
			       if l.split(" ")[0].lower().replace("_", "-") in ours]
			print("\n".join(bad))
			sys.exit(1 if bad else 0)
		PY
		rm -rf "$venv"
		echo "venv.sh: could not install $req (see above): the suite fails" >&2
		exit 2
	fi
	touch "$venv/.complete"
	echo "venv.sh: built in $(($(date +%s) - start)) s" >&2
fi
echo "$venv"
