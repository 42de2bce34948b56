# The CLI tier: the real `tpcomm` binary as a child process, with a fake driver and NVML.
# A fake CUDA driver and NVML (one folder each) so the probe's dlopen path runs without a GPU.
foreach(_fake cuda nvml)
  add_library(fake_${_fake} SHARED fake_driver/fake_${_fake}.cpp)
  tpcomm_target_defaults(fake_${_fake})
  set_target_properties(fake_${_fake} PROPERTIES
    PREFIX "" SUFFIX ""
    LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/fake_driver/${_fake})
endforeach()
set_target_properties(fake_cuda PROPERTIES OUTPUT_NAME "libcuda.so.1")
set_target_properties(fake_nvml PROPERTIES OUTPUT_NAME "libnvidia-ml.so.1")

# CLI tier: the real binary as a child process.
add_executable(tpcomm_cli_tests cli/cli_test.cpp)
tpcomm_target_defaults(tpcomm_cli_tests)
target_link_libraries(tpcomm_cli_tests PRIVATE tpcomm_test_support GTest::gtest_main)
target_compile_definitions(tpcomm_cli_tests PRIVATE
  TPCOMM_BIN="$<TARGET_FILE:tpcomm>"
  FAKE_DRIVER_DIR="${CMAKE_CURRENT_BINARY_DIR}/fake_driver")
add_dependencies(tpcomm_cli_tests tpcomm fake_cuda fake_nvml)
# 300 s: tpcomm tune's tests run tpcomm bench a score of times (release pass only: they took
# 114 s in the sanitizer build beside another test).
gtest_discover_tests(tpcomm_cli_tests DISCOVERY_TIMEOUT 30 TEST_FILTER ${_cli_filter}
  PROPERTIES TIMEOUT 300)
