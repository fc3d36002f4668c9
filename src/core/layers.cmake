# The layers of the core (docs/architecture.md, "Layers"): a file may
# include a header of its own layer or of a layer below it, never of one
# above.  Run when CMake configures the tree, by every build that changed
# a file of the core (the target layers), by ctest (cli_layers), or by
# hand:
#   cmake -DSHARDFS_SOURCE_DIR=. -P src/core/layers.cmake
# It names each file, its include and the rule, and fails, for every
# include that points up, every folder's private header (*_i.h) included
# from another folder, and every header of include/shardfs/ without a
# layer in the table below.

if(NOT SHARDFS_SOURCE_DIR)
	set(SHARDFS_SOURCE_DIR ${CMAKE_CURRENT_LIST_DIR}/../..)
endif()

# The layers, lowest first: a folder of src/core/ each.
set(layers util formats index plan view audit)

# Every public header's layer: the folder of the code it declares.  A new
# header goes here, in the layer of its .c files.
set(layer_of_error.h util)
set(layer_of_util.h util)
set(layer_of_prng.h util)
set(layer_of_crc32c.h util)
set(layer_of_digest.h util)
set(layer_of_pool.h util)
set(layer_of_spill.h util)
set(layer_of_share.h util)
set(layer_of_budget.h util)
set(layer_of_format.h formats)
set(layer_of_shard.h formats)
set(layer_of_parquet.h formats)
set(layer_of_lance.h formats)
set(layer_of_index.h index)
set(layer_of_indexer.h index)
set(layer_of_follow.h index)
set(layer_of_options.h plan)
set(layer_of_plan.h plan)
set(layer_of_mixture.h plan)
set(layer_of_slice.h view)
set(layer_of_view.h view)
set(layer_of_status.h view)
set(layer_of_window.h view)
set(layer_of_audit.h audit)
set(layer_of_observe.h audit)

# Includes allowed although they point up or cross a folder, each with
# its reason: "FILE|INCLUDE" (paths from the top of the tree).
set(allowed
	# the JSON forms of options and mixtures, which the layers above the
	# plan embed in their documents: jansson stays out of the public
	# headers
	"src/core/view/status.c|plan/plan_json_i.h"
	"src/core/audit/audit_report.c|plan/plan_json_i.h"
	"src/core/audit/observe_follow.c|plan/plan_json_i.h"
)

string(REPLACE ";" " < " order "${layers}")
set(problems "")

file(GLOB_RECURSE files RELATIVE ${SHARDFS_SOURCE_DIR}
	${SHARDFS_SOURCE_DIR}/src/core/*.c ${SHARDFS_SOURCE_DIR}/src/core/*.h
	${SHARDFS_SOURCE_DIR}/include/shardfs/*.h)
list(SORT files)

# The layer of a file, by its path, into ${out}; "" when it has none.
function(layer_of path out)
	set(l "")
	if(path MATCHES "^src/core/([^/]+)/")
		set(l ${CMAKE_MATCH_1})
	elseif(path MATCHES "^include/shardfs/([^/]+)$")
		set(l "${layer_of_${CMAKE_MATCH_1}}")
	endif()
	set(${out} "${l}" PARENT_SCOPE)
endfunction()

foreach(f ${files})
	layer_of(${f} fl)
	list(FIND layers "${fl}" fi)
	if(fi LESS 0)
		string(APPEND problems "\n${f}: no layer: a public header goes in the layer of the code it declares (src/core/layers.cmake, layer_of_NAME.h), a source file in a folder of src/core/ (${order})")
		continue()
	endif()
	get_filename_component(fdir ${f} DIRECTORY)
	file(STRINGS ${SHARDFS_SOURCE_DIR}/${f} incs
		REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
	foreach(line ${incs})
		string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\".*"
			"\\1" inc "${line}")
		# where the include is: the including file's folder, include/
		# or src/core/ (the core's include directories)
		if(EXISTS ${SHARDFS_SOURCE_DIR}/${fdir}/${inc})
			set(target ${fdir}/${inc})
		elseif(EXISTS ${SHARDFS_SOURCE_DIR}/include/${inc})
			set(target include/${inc})
		elseif(EXISTS ${SHARDFS_SOURCE_DIR}/src/core/${inc})
			set(target src/core/${inc})
		else()
			string(APPEND problems "\n${f} includes \"${inc}\", which is not in the core: the core includes its own headers and system ones (<...>)")
			continue()
		endif()
		get_filename_component(target ${target} ABSOLUTE
			BASE_DIR ${SHARDFS_SOURCE_DIR})
		file(RELATIVE_PATH target ${SHARDFS_SOURCE_DIR} ${target})
		list(FIND allowed "${f}|${inc}" ok)
		if(ok GREATER -1)
			continue()
		endif()
		layer_of(${target} tl)
		list(FIND layers "${tl}" ti)
		if(ti GREATER fi)
			string(APPEND problems "\n${f} includes \"${inc}\" (layer ${tl}) from layer ${fl}: dependencies point down only (${order}; docs/architecture.md, \"Layers\"): move what it needs into layer ${fl} or below, or the code that needs it up")
		endif()
		get_filename_component(tdir ${target} DIRECTORY)
		if(target MATCHES "_i\\.h$" AND NOT tdir STREQUAL fdir AND
		   NOT fdir MATCHES "^${tdir}/")
			string(APPEND problems "\n${f} includes \"${inc}\", the private header of ${tdir}/: a folder's *_i.h is included only inside it; what another folder needs goes in a public header (include/shardfs/)")
		endif()
	endforeach()
endforeach()
if(problems)
	# one line each, unwrapped, for grep and for the test (cli_layers)
	string(SUBSTRING "${problems}" 1 -1 problems)
	message(NOTICE "${problems}")
	message(FATAL_ERROR "the core's layers are broken (above): see docs/architecture.md, \"Layers\"")
endif()
