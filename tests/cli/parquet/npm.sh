# Sourced by the Parquet tests: parquet_npm BUILD TESTS installs the npm
# packages pinned by tests/cli/parquet/package-lock.json (DuckDB, parquet-wasm,
# hyparquet) into BUILD/parquet-npm, once per lock, and copies the test
# scripts beside node_modules (ES modules find node_modules next to
# themselves only).  Sets npmdir.
parquet_npm() {
	npmdir=$1/parquet-npm
	command -v node > /dev/null && command -v npm > /dev/null ||
		{ echo "FAIL: node and npm are needed (bash tests/install-deps.sh)"; return 1; }
	# npm install, not npm ci: the lock holds only the linux-x64 DuckDB
	# binding of the platform packages, which npm ci refuses; npm install
	# takes the locked versions all the same.  About 8 s and 29 MB from
	# the registry the first time, 86 MB installed.
	if ! cmp -s "$2/cli/parquet/package-lock.json" "$npmdir/installed.lock" ||
		[ ! -d "$npmdir/node_modules/@duckdb/node-api" ]; then
		rm -rf "$npmdir"
		mkdir -p "$npmdir"
		cp "$2/cli/parquet/package.json" "$2/cli/parquet/package-lock.json" "$npmdir/"
		(cd "$npmdir" && npm install --no-audit --no-fund --loglevel=error > /dev/null) || return 1
		cp "$2/cli/parquet/package-lock.json" "$npmdir/installed.lock"
	fi
	cp "$2"/cli/parquet/*.mjs "$npmdir/"
}
