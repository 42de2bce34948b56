# Proves the layering rules (docs/architecture.md) hold in the build as it is configured:
#  1. by construction: for every pair of layers (L, M), a scratch file that includes a public and
#     a private header of M is preprocessed with the exact flags the build gives L's sources
#     (compile_commands.json); it must compile when L may use M and fail when it may not;
#  2. by the check script: a scratch copy of src/ with one violation of each of its rules must
#     fail naming the file and the rule, and the clean copy must pass.
# Usage: cmake -DPROJECT_DIR=<repository> -DBUILD_DIR=<build tree> -P layering_test.cmake
cmake_minimum_required(VERSION 3.21)
set(PROJECT_SOURCE_DIR ${PROJECT_DIR})
include(${PROJECT_DIR}/cmake/layers.cmake)

# One public and one private header of each layer (none: the layer has no header of that kind).
set(_probe_common "tpcomm/error.hpp;common/json_reader.hpp")
set(_probe_facts "tpcomm/facts.hpp")
set(_probe_plan "tpcomm/plan.hpp;plan/group_view.hpp")
set(_probe_probe "tpcomm/probe.hpp;probe/cuda_driver.hpp")
set(_probe_control "tpcomm/store.hpp;control/socket_util.hpp")
set(_probe_kernels "tpcomm/convert.hpp;kernels/cpu/reduce.hpp")
set(_probe_transport "transport/common/backend.hpp")
set(_probe_runtime "tpcomm/communicator.hpp;runtime/communicator_state.hpp")

file(READ ${BUILD_DIR}/compile_commands.json _db)
string(JSON _n LENGTH "${_db}")
math(EXPR _last "${_n} - 1")

# The compiler and its flags for the first C++ source of a layer, without output/input/deps.
function(layer_flags layer out_var)
  foreach(_i RANGE ${_last})
    string(JSON _file GET "${_db}" ${_i} file)
    if(_file MATCHES "/src/${layer}/[^ ]*\\.cpp$")
      string(JSON _cmd GET "${_db}" ${_i} command)
      separate_arguments(_args UNIX_COMMAND "${_cmd}")
      set(_kept "")
      set(_skip FALSE)
      foreach(_a IN LISTS _args)
        if(_skip)
          set(_skip FALSE)
        elseif(_a MATCHES "^-(o|c|MT|MF)$")
          set(_skip TRUE)
        elseif(NOT _a STREQUAL "-MD")
          list(APPEND _kept "${_a}")
        endif()
      endforeach()
      set(${out_var} "${_kept}" PARENT_SCOPE)
      return()
    endif()
  endforeach()
  message(FATAL_ERROR "no C++ source of layer ${layer} in ${BUILD_DIR}/compile_commands.json")
endfunction()

set(_scratch ${BUILD_DIR}/layering_test)
file(REMOVE_RECURSE ${_scratch})
file(MAKE_DIRECTORY ${_scratch})
set(_wrong "")
set(_checked 0)
foreach(_l IN LISTS TPCOMM_LAYERS)
  layer_flags(${_l} _flags)
  set(_row "")
  foreach(_m IN LISTS TPCOMM_LAYERS)
    set(_allowed FALSE)
    if(_m STREQUAL _l OR _m IN_LIST TPCOMM_LAYER_USES_${_l})
      set(_allowed TRUE)
    endif()
    foreach(_h IN LISTS _probe_${_m})
      string(MAKE_C_IDENTIFIER "${_l}_${_h}" _name)
      file(WRITE ${_scratch}/${_name}.cpp "#include \"${_h}\"\n")
      execute_process(COMMAND ${_flags} -E ${_scratch}/${_name}.cpp -o ${_scratch}/${_name}.i
                      RESULT_VARIABLE _rc ERROR_VARIABLE _err)
      math(EXPR _checked "${_checked} + 1")
      if(_allowed AND NOT _rc EQUAL 0)
        string(APPEND _wrong "\n  ${_l} may use ${_m} but \"${_h}\" does not compile:\n${_err}")
      elseif(NOT _allowed AND _rc EQUAL 0)
        string(APPEND _wrong "\n  ${_l} may not use ${_m} but \"${_h}\" compiles")
      elseif(NOT _allowed AND NOT _err MATCHES "No such file")
        string(APPEND _wrong "\n  ${_l} including \"${_h}\" failed for another reason:\n${_err}")
      endif()
    endforeach()
    if(_allowed)
      string(APPEND _row " ${_m}")
    endif()
  endforeach()
  message(STATUS "${_l} sees:${_row}")
endforeach()
if(_wrong)
  message(FATAL_ERROR "the include paths do not match the layering rules:${_wrong}")
endif()
message(STATUS "by construction: ${_checked} includes compiled or failed as the rules say")

# 2. The check script's rules, one scratch violation each.
set(_cases
  "relative|plan/sneaky.cpp|#include \"../probe/probe_parts.hpp\""
  "relative|transport/custom/sneaky.cuh|#include \"../../runtime/communicator_state.hpp\""
  "relative|control/sneaky.hpp|#include \"/usr/include/stdio.h\""
  "pure|facts/sneaky.cpp|#include <fstream>"
  "pure|plan/sneaky.cpp|#include <sys/socket.h>"
  "pure|plan/sneaky.hpp|#include \"tpcomm/env.hpp\""
  "pure|kernels/cpu/sneaky.cpp|#include \"tpcomm/env.hpp\""
  "pure|kernels/cuda/sneaky.cuh|#include <fstream>"
  "layer|elsewhere/sneaky.cpp|#include \"tpcomm/error.hpp\""
  "naming|transport/gloo/sneaky.cpp|// a file without the prefix its siblings have")
set(_tree ${_scratch}/tree)
file(COPY ${PROJECT_DIR}/src DESTINATION ${_tree})
execute_process(COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${_tree} -P ${PROJECT_DIR}/cmake/check_layering.cmake
                RESULT_VARIABLE _rc ERROR_VARIABLE _err)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "the clean tree fails the layering check:\n${_err}")
endif()
foreach(_case IN LISTS _cases)
  string(REPLACE "|" ";" _parts "${_case}")
  list(GET _parts 0 _rule)
  list(GET _parts 1 _path)
  list(GET _parts 2 _line)
  file(WRITE ${_tree}/src/${_path} "${_line}\n")
  execute_process(COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${_tree} -P ${PROJECT_DIR}/cmake/check_layering.cmake
                  RESULT_VARIABLE _rc ERROR_VARIABLE _err)
  file(REMOVE ${_tree}/src/${_path})
  string(REGEX REPLACE "[.]" "[.]" _path_re "${_path}")
  if(_rc EQUAL 0)
    message(FATAL_ERROR "[${_rule}] src/${_path} with '${_line}' passed the layering check")
  elseif(NOT _err MATCHES "${_path_re}: \\[${_rule}\\]")
    message(FATAL_ERROR "[${_rule}] the error does not name src/${_path} and the rule:\n${_err}")
  endif()
  message(STATUS "check script: [${_rule}] src/${_path} rejected")
endforeach()
file(REMOVE_RECURSE ${_scratch})
