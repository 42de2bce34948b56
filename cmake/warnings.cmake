# Warnings as errors on tpcomm's own code only (third-party headers are included as SYSTEM), and
# the sanitizers when TPCOMM_SANITIZE is on.
function(tpcomm_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Werror -Wshadow -Wnon-virtual-dtor>)
  if(TPCOMM_SANITIZE)
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=address,undefined -fno-omit-frame-pointer>)
    target_link_options(${target} PUBLIC -fsanitize=address,undefined)
  endif()
endfunction()

# A program of tpcomm's own (tools, tests, benchmarks, examples): warnings, and the public
# headers and src/ on its include path.
function(tpcomm_target_defaults target)
  tpcomm_warnings(${target})
  target_include_directories(${target} PRIVATE
    ${PROJECT_SOURCE_DIR}/include ${PROJECT_BINARY_DIR}/generated ${PROJECT_SOURCE_DIR}/src)
endfunction()
