# The layering rules that include paths cannot express (cmake/layers.cmake makes the rest a
# compile error), checked on every build over every .cpp/.hpp/.cu/.cuh under src/:
#   relative  no quoted include climbs out of its folder ("../x.hpp") or names an absolute path:
#             either would reach past the layer's view
#   pure      facts, plan and kernels do no I/O: no sockets, dlopen, files or streams; plan and
#             kernels read no environment (tpcomm/env.hpp) either
#   layer     every source lies in the folder of a layer
#   naming    a backend's folder, src/transport/<b>/ (all but common, cpu and cuda, the machinery
#             backends share), holds <b>_backend.hpp, and either every file begins with <b>_ or
#             only <b>_backend.{hpp,cpp} do (docs/contributing.md)
# Usage: cmake -DSOURCE_DIR=<repository> -P check_layering.cmake
cmake_minimum_required(VERSION 3.21)
set(_layers common facts plan probe control kernels transport runtime)
set(_pure_facts "sys/socket|netinet|dlfcn|fstream|cstdio|iostream|unistd")
set(_pure_plan "${_pure_facts}|tpcomm/env.hpp")
set(_pure_kernels "${_pure_plan}")

set(_failed "")
file(GLOB_RECURSE _files "${SOURCE_DIR}/src/*.cpp" "${SOURCE_DIR}/src/*.hpp" "${SOURCE_DIR}/src/*.cu"
     "${SOURCE_DIR}/src/*.cuh")
foreach(_f IN LISTS _files)
  file(RELATIVE_PATH _rel "${SOURCE_DIR}/src" "${_f}")
  string(REGEX REPLACE "/.*" "" _layer "${_rel}")
  if(NOT _layer IN_LIST _layers)
    string(APPEND _failed "\n  ${_f}: [layer] not in the folder of a layer (${_layers})")
    continue()
  endif()
  file(STRINGS "${_f}" _includes REGEX "^[ \t]*#[ \t]*include")
  foreach(_inc IN LISTS _includes)
    if(_inc MATCHES "\"(\\.\\./|[^\"]*/\\.\\./|/)")
      string(APPEND _failed "\n  ${_f}: [relative] '${_inc}': include by path from src/, never ../ or /")
    endif()
    if(DEFINED _pure_${_layer} AND _inc MATCHES "[<\"](${_pure_${_layer}})")
      string(APPEND _failed "\n  ${_f}: [pure] '${_inc}' is not allowed in layer ${_layer} (no I/O)")
    endif()
  endforeach()
endforeach()

file(GLOB _transport_folders LIST_DIRECTORIES true "${SOURCE_DIR}/src/transport/*")
foreach(_dir IN LISTS _transport_folders)
  get_filename_component(_b "${_dir}" NAME)
  if(NOT IS_DIRECTORY "${_dir}" OR _b MATCHES "^(common|cpu|cuda)$")
    continue()
  endif()
  if(NOT EXISTS "${_dir}/${_b}_backend.hpp")
    string(APPEND _failed "\n  ${_dir}: [naming] a backend's folder declares it in ${_b}_backend.hpp")
  endif()
  file(GLOB _names RELATIVE "${_dir}" "${_dir}/*")
  set(_bare "")
  set(_extra_prefixed "")
  foreach(_n IN LISTS _names)
    if(NOT _n MATCHES "^${_b}_")
      list(APPEND _bare ${_n})
    elseif(NOT _n MATCHES "^${_b}_backend\\.(hpp|cpp)$")
      list(APPEND _extra_prefixed ${_n})
    endif()
  endforeach()
  if(_bare AND _extra_prefixed)
    string(APPEND _failed "\n  ${_dir}/${_bare}: [naming] in ${_b}/ either every file begins with "
                          "${_b}_ or only ${_b}_backend.* does (prefixed: ${_extra_prefixed})")
  endif()
endforeach()

if(_failed)
  message(FATAL_ERROR "Layering violation (docs/architecture.md):${_failed}")
endif()
