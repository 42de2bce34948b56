// The worker's network and signal knobs (worker_network.cpp):
//   TEST_SIGNAL_EVERY_US=N   a no-op SIGALRM handler without SA_RESTART and a timer that fires it
//                            every N us from the start (a sampling profiler's pattern)
//   TEST_OPTION_TIMEOUT_MS=N CommunicatorOptions::timeout (the deadline the options set, not
//                            TPCOMM_TIMEOUT_MS)
//   after_file PATH          mode: create, one checked all-reduce, then wait for PATH to exist
//                            and call again; prints "starting at", "created at" and "calling at"
//                            with the wall-clock time in ms
//   until_lost CALLS         mode: checked all-reduces (1 KiB and 256 KiB) and all-gathers in
//                            turn, every element, until a call fails or CALLS were made; prints
//                            "calling from T", then "ERROR (code) at T in call #K ... W wrong"
//                            or "N calls, W wrong, no error"
#pragma once

#include <string>

#include "tpcomm/tpcomm.hpp"

namespace tpcomm::test {

long long wall_clock_ms();
// Starts the signal timer (TEST_SIGNAL_EVERY_US); with `announce`, prints "rank R: starting at T".
void worker_prelude(int rank, bool announce);
CommunicatorOptions options_from_env();
int run_after_file(Communicator& comm, const std::string& path);
int run_until_lost(Communicator& comm, int calls);

}  // namespace tpcomm::test
