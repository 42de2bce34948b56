// The smallest tpcomm program: join the group the launcher made, agree on a plan, all-reduce.
//
//   tpcomm run -n 4 -- ./build/bin/allreduce
//   tpcomm run -n 4 --nodes 2 -- ./build/bin/allreduce      (two simulated nodes, as root)
#include <cstdio>
#include <string>
#include <vector>

#include "tpcomm/tpcomm.hpp"

int main() {
  try {
    auto bootstrap = tpcomm::bootstrap_from_environment(tpcomm::Deadline::from_env());
    auto comm = tpcomm::Communicator::create(bootstrap);

    // Rank r contributes r + 1 everywhere: the sum is W (W + 1) / 2.
    const std::size_t count = 1 << 20;
    std::vector<float> data(count, static_cast<float>(comm->rank() + 1));
    comm->all_reduce(data.data(), data.data(), count, tpcomm::DataType::kFloat32,
                     tpcomm::ReduceOp::kSum);

    const int w = comm->size();
    const float expected = static_cast<float>(w * (w + 1) / 2);
    std::size_t wrong = 0;
    for (float v : data) wrong += v != expected;
    // The route that carried the call, as the communicator counted it (Communicator::stats()).
    std::string via = "none";
    for (const auto& r : comm->stats()) {
      if (r.collective == tpcomm::Collective::kAllReduce && r.backend) {
        via = std::string(tpcomm::to_string(*r.backend)) + "/" +
              std::string(tpcomm::to_string(*r.algorithm));
      }
    }
    std::printf("rank %d of %d on %s: plan %s (%d node%s), all_reduce of %zu floats via %s: %s\n",
                comm->rank(), w,
                comm->facts().ranks[static_cast<std::size_t>(comm->rank())].host.c_str(),
                comm->plan().digest.c_str(), comm->plan().nodes, comm->plan().nodes == 1 ? "" : "s",
                count, via.c_str(), wrong == 0 ? "correct" : "WRONG");
    return wrong == 0 ? 0 : 1;
  } catch (const tpcomm::Error& e) {
    std::fprintf(stderr, "allreduce: %s\n", e.what());
    return 1;
  }
}
