#!/bin/bash
# The check of the core's layers (src/core/layers.cmake, docs/architecture.md
# "Layers"): the tree passes it; a copy of the tree with an include planted
# that points up, a folder's private header included from another folder,
# or a public header without a layer fails it, each named with its file,
# its include and the rule.
. "$(dirname "$0")/../lib.sh"
TOP=$(cd "$TESTS/.." && pwd)
CHECK=$TOP/src/core/layers.cmake

# layers DIR: the check's status and its lines naming what is wrong
layers() {
	cmake -DSHARDFS_SOURCE_DIR="$1" -P "$CHECK" 2>&1 |
		grep -v '^CMake Error at\|^  the core.s layers are broken\|^$'
	return "${PIPESTATUS[0]}"
}

# a copy of the core to plant includes in
fresh() {
	rm -rf "$T/tree"
	mkdir -p "$T/tree"
	cp -r "$TOP/src" "$TOP/include" "$T/tree/"
}

# plant FILE LINE: add an include line after FILE's first include
plant() {
	sed -i "0,/^#include \"/s||$2\n&|" "$T/tree/$1"
}

expect_eq "the tree keeps its layers" "$(layers "$TOP"; echo "status $?")" \
	"status 0"

rule='dependencies point down only (util < formats < index < plan < view < audit; docs/architecture.md, "Layers")'
fresh
plant src/core/formats/tar.c '#include "shardfs/plan.h"'
expect_eq "a driver that includes the plan" \
	"$(layers "$T/tree"; echo "status $?")" \
	"src/core/formats/tar.c includes \"shardfs/plan.h\" (layer plan) from layer formats: $rule: move what it needs into layer formats or below, or the code that needs it up
status 1"

fresh
plant include/shardfs/index.h '#include "shardfs/mixture.h"'
plant src/core/util/util.c '#include "shardfs/format.h"'
expect_eq "a public header and a chore that point up, both named" \
	"$(layers "$T/tree"; echo "status $?")" \
	"include/shardfs/index.h includes \"shardfs/mixture.h\" (layer plan) from layer index: $rule: move what it needs into layer index or below, or the code that needs it up
src/core/util/util.c includes \"shardfs/format.h\" (layer formats) from layer util: $rule: move what it needs into layer util or below, or the code that needs it up
status 1"

fresh
plant src/core/view/view.c '#include "index/index_i.h"'
expect_eq "another folder's private header" \
	"$(layers "$T/tree"; echo "status $?")" \
	"src/core/view/view.c includes \"index/index_i.h\", the private header of src/core/index/: a folder's *_i.h is included only inside it; what another folder needs goes in a public header (include/shardfs/)
status 1"

fresh
printf '#ifndef X\n#define X\n#endif\n' >"$T/tree/include/shardfs/cache.h"
expect_eq "a public header without a layer" \
	"$(layers "$T/tree"; echo "status $?")" \
	"include/shardfs/cache.h: no layer: a public header goes in the layer of the code it declares (src/core/layers.cmake, layer_of_NAME.h), a source file in a folder of src/core/ (util < formats < index < plan < view < audit)
status 1"

# the build runs it: a configuration of the planted tree stops
fresh
cp -r "$TOP/CMakeLists.txt" "$T/tree/"
plant src/core/formats/tar.c '#include "shardfs/plan.h"'
cmake -S "$T/tree" -B "$T/build" -DSHARDFS_TESTS=OFF >"$T/configure.out" 2>&1
expect_eq "a configuration with an include that points up fails" "$?" 1
expect_eq "and names the file" \
	"$(grep -c '^src/core/formats/tar.c includes "shardfs/plan.h"' "$T/configure.out")" 1

finish
