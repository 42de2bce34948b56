# Warnings as errors on tpcomm's own code only (third-party headers are included as SYSTEM), and
# the sanitizers when TPCOMM_SANITIZE is on.
function(tpcomm_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Werror -Wshadow -Wnon-virtual-dtor>)
  if(TPCOMM_SANITIZE)
    # -Wno-maybe-uninitialized: at -O1 with the sanitizers GCC 12 warns inside libstdc++'s
    # std::regex (GCC bug 105562), a false positive; the release build at -O2 keeps the warning
    # for our own code.
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=address,undefined -fno-omit-frame-pointer
      -Wno-maybe-uninitialized>)
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
