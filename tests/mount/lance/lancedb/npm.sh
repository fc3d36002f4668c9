# Sourced by the LanceDB test and tests/bench/bench_lance.sh:
# lancedb_npm DIR installs the npm packages pinned by
# tests/mount/lance/lancedb/package-lock.json (@lancedb/lancedb, its linux-x64
# binding, apache-arrow) once per lock into
# /var/cache/shardfs-test/npm-lancedb-<hash of the lock> (the binding
# alone is 200 MB: one copy for every build directory, and no registry
# after the first run), then makes DIR a place to run this directory's
# scripts from: ES modules find node_modules next to themselves only, so
# DIR gets the scripts and a symlink to the cached node_modules.  Sets
# lancedb_dir=DIR.  Returns non-zero, with npm's message, when the
# install fails.
lancedb_npm() {
	local here cache key lock
	here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
	lancedb_dir=$1
	command -v node > /dev/null && command -v npm > /dev/null ||
		{ echo "FAIL: node and npm are needed (bash tests/install-deps.sh)" >&2; return 1; }
	key=$(sha256sum < "$here/package-lock.json" | cut -c1-16)
	cache=/var/cache/shardfs-test/npm-lancedb-$key
	lock=$cache.lock
	mkdir -p /var/cache/shardfs-test
	# --omit=optional: @lancedb/lancedb's optional dependencies are the
	# embedding providers (@huggingface/transformers, openai) and every
	# platform's binding; the linux-x64 one is a dependency of ours.
	# About 15 s and 60 MB from the registry the first time.
	(
		flock 9
		[ -e "$cache/.complete" ] && exit 0
		rm -rf "$cache"
		mkdir -p "$cache"
		cp "$here/package.json" "$here/package-lock.json" "$cache/"
		(cd "$cache" && npm install --no-audit --no-fund --loglevel=error \
			--omit=optional > /dev/null) || { rm -rf "$cache"; exit 1; }
		touch "$cache/.complete"
	) 9> "$lock" || { echo "FAIL: npm install of tests/mount/lance/lancedb/package.json" >&2; return 1; }
	mkdir -p "$lancedb_dir"
	ln -sfn "$cache/node_modules" "$lancedb_dir/node_modules"
	cp "$here"/*.mjs "$lancedb_dir/"
}
