# The layers of tpcomm and the only arrows between them (docs/architecture.md). Each layer's
# targets see, through their include path, only the headers of the layers they may use: a
# forbidden #include does not compile. The view of layer L is a folder in the build tree with
#   tpcomm/<header>  links to the public headers (include/tpcomm) owned by L or a layer L uses,
#   <M>/             links to src/<M> for L itself and every layer M that L uses.
# What include paths cannot say (no `..` includes, no I/O headers in the pure layers) is checked
# by cmake/check_layering.cmake on every build.

set(TPCOMM_LAYERS common facts plan probe control kernels transport runtime)
set(TPCOMM_LAYER_USES_common "")
set(TPCOMM_LAYER_USES_facts common)
set(TPCOMM_LAYER_USES_plan facts common)
set(TPCOMM_LAYER_USES_probe facts common)
set(TPCOMM_LAYER_USES_control common)
set(TPCOMM_LAYER_USES_kernels common)
set(TPCOMM_LAYER_USES_transport kernels control common)
set(TPCOMM_LAYER_USES_runtime transport kernels control probe plan facts common)

# Every public header belongs to exactly one layer.
set(TPCOMM_HEADERS_common error.hpp log.hpp env.hpp types.hpp)
set(TPCOMM_HEADERS_facts facts.hpp facts_json.hpp)
set(TPCOMM_HEADERS_plan plan.hpp tuning.hpp)
set(TPCOMM_HEADERS_probe probe.hpp)
set(TPCOMM_HEADERS_control deadline.hpp store.hpp tcp_store.hpp bootstrap.hpp)
set(TPCOMM_HEADERS_kernels convert.hpp rmsnorm.hpp)
set(TPCOMM_HEADERS_transport stage_time.hpp)
set(TPCOMM_HEADERS_runtime call_stats.hpp communicator.hpp tpcomm.hpp tuning_file.hpp)

# A header in include/tpcomm that no layer owns would be visible to none: refuse to configure.
file(GLOB _public RELATIVE ${PROJECT_SOURCE_DIR}/include/tpcomm ${PROJECT_SOURCE_DIR}/include/tpcomm/*.hpp)
set(_owned "")
foreach(_layer IN LISTS TPCOMM_LAYERS)
  list(APPEND _owned ${TPCOMM_HEADERS_${_layer}})
endforeach()
foreach(_h IN LISTS _public)
  if(NOT _h IN_LIST _owned)
    message(FATAL_ERROR "include/tpcomm/${_h} belongs to no layer: add it to a TPCOMM_HEADERS_<layer> "
                        "list in cmake/layers.cmake")
  endif()
endforeach()

# Builds the view of one layer and returns its folder.
function(tpcomm_layer_view layer out_var)
  set(_view ${PROJECT_BINARY_DIR}/layers/${layer})
  set(${out_var} ${_view} PARENT_SCOPE)
  get_property(_built GLOBAL PROPERTY TPCOMM_VIEW_BUILT_${layer})
  if(_built)
    return()
  endif()
  set_property(GLOBAL PROPERTY TPCOMM_VIEW_BUILT_${layer} TRUE)
  file(REMOVE_RECURSE ${_view})
  file(MAKE_DIRECTORY ${_view}/tpcomm)
  foreach(_m IN ITEMS ${layer} ${TPCOMM_LAYER_USES_${layer}})
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/src/${_m} ${_view}/${_m} SYMBOLIC)
    foreach(_h IN LISTS TPCOMM_HEADERS_${_m})
      file(CREATE_LINK ${PROJECT_SOURCE_DIR}/include/tpcomm/${_h} ${_view}/tpcomm/${_h} SYMBOLIC)
    endforeach()
  endforeach()
  # The generated version header belongs to common, which every layer uses.
  file(CREATE_LINK ${PROJECT_BINARY_DIR}/generated/tpcomm/version.hpp ${_view}/tpcomm/version.hpp
       SYMBOLIC)
endfunction()

# Makes `target` a target of `layer`: warnings, and the layer's view as its only include path of
# tpcomm headers (PRIVATE: a target that links it gets nothing of tpcomm's from it).
function(tpcomm_layer_target target layer)
  if(NOT layer IN_LIST TPCOMM_LAYERS)
    message(FATAL_ERROR "${target}: unknown layer ${layer}")
  endif()
  tpcomm_warnings(${target})
  tpcomm_layer_view(${layer} _view)
  target_include_directories(${target} PRIVATE ${_view})
  set_property(TARGET ${target} PROPERTY TPCOMM_LAYER ${layer})
endfunction()
