# The process tier: the rank program and the tests that start groups of it through tpcomm run.
# The rank program of the process-level tests (run under tpcomm run).
add_executable(tpcomm_test_worker integration/worker/worker.cpp integration/worker/worker_fork.cpp
  integration/worker/worker_network.cpp integration/worker/worker_integers.cpp
  integration/worker/worker_exchanges.cpp integration/worker/worker_deterministic.cpp)
tpcomm_target_defaults(tpcomm_test_worker)
target_include_directories(tpcomm_test_worker PRIVATE ${PROJECT_SOURCE_DIR}/src
  ${CMAKE_CURRENT_SOURCE_DIR})
target_link_libraries(tpcomm_test_worker PRIVATE tpcomm_runtime)

# Faults tier: real processes through tpcomm run.
add_executable(tpcomm_process_tests faults/process_test.cpp faults/store_trust_process_test.cpp
  faults/launcher_process_test.cpp faults/dump_facts_process_test.cpp
  faults/partition_process_test.cpp faults/store_loss_process_test.cpp
  faults/node_network_process_test.cpp faults/node_network_support.cpp
  faults/link_fault_process_test.cpp faults/mpi_lane_process_test.cpp)
tpcomm_target_defaults(tpcomm_process_tests)
target_link_libraries(tpcomm_process_tests PRIVATE tpcomm_test_support tpcomm_control tpcomm_plan
  GTest::gtest_main)
target_compile_definitions(tpcomm_process_tests PRIVATE
  TPCOMM_BIN="$<TARGET_FILE:tpcomm>" TPCOMM_WORKER="$<TARGET_FILE:tpcomm_test_worker>"
  TPCOMM_HAVE_MPI=$<BOOL:${TPCOMM_HAVE_MPI}>)
add_dependencies(tpcomm_process_tests tpcomm tpcomm_test_worker)
gtest_discover_tests(tpcomm_process_tests DISCOVERY_TIMEOUT 30 TEST_FILTER ${_process_filter}
  PROPERTIES TIMEOUT 600)
