# Copies the sources to a scratch tree, adds a plan file that includes the probe header, and
# expects cmake/check_layering.cmake to fail naming it; the clean tree must pass.
set(_scratch "${CMAKE_CURRENT_BINARY_DIR}/layering_scratch")
file(REMOVE_RECURSE "${_scratch}")
file(COPY "${PROJECT_DIR}/src" DESTINATION "${_scratch}")
execute_process(COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${_scratch} -P ${PROJECT_DIR}/cmake/check_layering.cmake
                RESULT_VARIABLE _clean_rc ERROR_VARIABLE _clean_err)
if(NOT _clean_rc EQUAL 0)
  message(FATAL_ERROR "the clean tree fails the layering check:\n${_clean_err}")
endif()
file(WRITE "${_scratch}/src/plan/sneaky.cpp" "#include \"tpcomm/probe.hpp\"\n")
execute_process(COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${_scratch} -P ${PROJECT_DIR}/cmake/check_layering.cmake
                RESULT_VARIABLE _rc ERROR_VARIABLE _err)
file(REMOVE_RECURSE "${_scratch}")
if(_rc EQUAL 0)
  message(FATAL_ERROR "a plan source including tpcomm/probe.hpp passed the layering check")
endif()
if(NOT _err MATCHES "sneaky.cpp.*not allowed in layer plan")
  message(FATAL_ERROR "the layering error does not name the file and layer:\n${_err}")
endif()
message(STATUS "layering check rejected the violation as expected")
