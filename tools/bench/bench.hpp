// tpcomm bench: the nccl-tests table for tpcomm's collectives (docs/bench.md), optionally side by
// side with Open MPI and Gloo on the same data in the same run.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim_nodes/node_network.hpp"
#include "tpcomm/types.hpp"

namespace tpcomm::cli {

struct BenchArgs {
  int ranks = 2;
  int nodes = 1;
  Op op = Op::kAllReduce;
  DataType dtype = DataType::kFloat32;
  ReduceOp redop = ReduceOp::kSum;
  std::uint64_t min_bytes = 4096;
  std::uint64_t max_bytes = 16u << 20;
  std::uint64_t factor = 2;
  int iters = 0;  // 0: as many as fit in 25 ms per size (at least 21)
  int warmup = 10;
  bool check = false;
  // all_to_all: all_to_allv with a mixture-of-experts router's counts (bench_exchange.hpp), rows
  // of `hidden` elements.
  bool uneven = false;
  std::size_t hidden = 4096;
  std::optional<Backend> backend;  // force one backend (others disabled)
  // "mpi", "gloo" or "mpi,gloo"; "unfused" (all_reduce_rmsnorm); "deterministic": the same
  // calls on a second communicator in deterministic mode
  std::string compare;
  // Who starts the ranks: "tpcomm" or "mpirun" (launcher/mpirun_launch.hpp).
  std::string launch = "tpcomm";
  std::string json;              // write every row here
  std::string plot;              // draw latency and bus bandwidth per engine into this PNG
  std::string bind_to = "core";  // "core": one CPU per rank when there are enough; "none"
  std::string tuning;            // a tuning file for every rank (TPCOMM_TUNING)
  bool registered = false;       // also time inputs in registered buffers (allocate)
  // --threads: TPCOMM_THREADS for the ranks (launcher/team_launch.hpp).
  std::optional<int> threads;
  // With --nodes: the nodes' network, rate and loss (sim_nodes/node_network.hpp); inside the group
  // only what the header and --json rows report.
  NodeNetworkOptions node_network;
};

// Inside a group (tpcomm run, mpirun, torchrun): run the sweep; rank 0 prints the table.
int run_bench_in_group(const BenchArgs& args);

// The argv that re-runs this bench inside a group.
std::vector<std::string> bench_argv(const BenchArgs& args, const std::string& self);

}  // namespace tpcomm::cli
