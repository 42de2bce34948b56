// --threads of tpcomm run, bench and tune: the team size the ranks get (through TPCOMM_THREADS,
// which the launchers pass on), and the binding that goes with it: each rank an equal share of
// the cores when its team may have more than one thread, one core each when it has one.
#pragma once

#include <optional>
#include <string>

#include <CLI/CLI.hpp>

namespace tpcomm::cli {

// Adds --threads T to `cmd` (0: the ranks' default share of their CPUs; 1: the calling thread).
CLI::Option* add_threads_option(CLI::App* cmd, std::optional<int>& threads);

// Sets TPCOMM_THREADS for the ranks when --threads was given, and returns the team size they
// will be asked for (TPCOMM_THREADS's, 0 by default). With --bind-to core, T > 1 must fit the
// share of cores each of `ranks` gets; else a usage error says what would fit.
int apply_threads_option(const std::optional<int>& threads, int ranks, bool bind_cores);

// Whether ranks asked for `threads` get an equal share of the cores rather than one each.
inline bool wants_core_shares(int threads) {
  return threads != 1;
}

}  // namespace tpcomm::cli
