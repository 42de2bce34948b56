// tpcomm tune's arguments, and what times one candidate: the candidates a plan admits, and one
// `tpcomm bench` run forced to one of them (cli/cmd_tune.cpp chooses among the times).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tpcomm/plan.hpp"
#include "tpcomm/tuning.hpp"

namespace tpcomm::cli {

struct TuneArgs {
  std::vector<int> groups = {2};  // -n: the group sizes to tune, one entry of the file each
  int ranks = 2;                  // the group being tuned now
  std::vector<Op> ops = {Op::kAllReduce, Op::kAllGather, Op::kReduceScatter};
  DataType dtype = DataType::kFloat32;
  std::uint64_t min_bytes = 4096;
  std::uint64_t max_bytes = 16u << 20;
  std::uint64_t factor = 4;
  int rounds = 3;
  std::vector<std::uint64_t> steps = {128u << 10};  // besides the lane: shm steps to time
  std::string output;
  std::string bind_to = "core";
  int nodes = 1;                  // --nodes: simulated nodes of tpcomm run (hier, hier_mpi)
  std::string launch = "tpcomm";  // --launch mpirun: ranks bootstrapped through MPI (hier_mpi)
  std::optional<int> threads;     // --threads: the team size whose team_min_bytes is measured
  std::size_t hidden = 4096;      // all_reduce_rmsnorm: the row length timed
};

// A team for every call of a measurement: `threads` per rank from `min_bytes` on.
struct TeamTrial {
  int threads = 1;
  std::uint64_t min_bytes = 0;
};

// What the benchmark's backend/algorithm column says of a call the candidate serves.
std::string path_of(const Candidate& c);
// One word, for the table's columns: the path, and "/256K" for a candidate with a step.
std::string name_of(const Candidate& c);
// The built-in plan of the group being tuned (ranks, nodes, launcher).
Plan builtin_plan(const TuneArgs& a);
// The row's candidates for a choice: the choice, then (across nodes) the built-in row's own.
std::vector<Candidate> with_builtin_after(const Candidate& chosen, const TuneArgs& a, Op op,
                                          std::uint64_t size);
// Every backend and algorithm the plan admits for `op`, and shm's with each step of `steps`.
std::vector<Candidate> candidates(Op op, const Plan& plan, const std::vector<std::uint64_t>& steps);
// Runs `tpcomm bench` for one op with every call forced to `c`; its time per size (us).
// With `team`: each rank's team as it says (TPCOMM_THREADS and the entry's team_min_bytes).
std::map<std::uint64_t, double> measure(const TuneArgs& a, Op op, const Candidate& c,
                                        const std::string& self, const std::string& dir,
                                        const TeamTrial* team = nullptr);

}  // namespace tpcomm::cli
