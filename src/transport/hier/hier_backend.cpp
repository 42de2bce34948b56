// hier and hier_mpi: node groups for shm over the group's store, lanes for Gloo (over the same
// store) or for MPI (split from mpirun's world); voted set-up steps (the shm pair, then the
// lane's), and each op as stages over the two (hier_ops.hpp).
#include "hier_backend.hpp"

#include <fmt/format.h>

#include "hier_ops.hpp"
#include "hier_stages.hpp"
#include "tpcomm/error.hpp"
#include "transport/common/call_sizes.hpp"

namespace tpcomm::transport {
namespace {

class HierBackend final : public CollectiveBackend {
 public:
  HierBackend(const BackendContext& context, LaneEngine engine) : stages_(context, engine) {}

  Backend kind() const override { return stages_.mpi() ? Backend::kHierMpi : Backend::kHier; }
  int setup_steps() const override { return stages_.mpi() ? 3 : 4; }
  std::string setup_step_name(int step) const override {
    static const char* gloo[] = {"hier.shm.create", "hier.shm.map", "hier.gloo.device",
                                 "hier.gloo.connect"};
    static const char* mpi_lanes[] = {"hier_mpi.shm.create", "hier_mpi.shm.map",
                                      "hier_mpi.mpi.split"};
    return stages_.mpi() ? mpi_lanes[step] : gloo[step];
  }

  void run_setup_step(int step, const Deadline& deadline) override {
    if (step == 0) stages_.make_groups();
    if (step < 2) {
      stages_.node_backend().run_setup_step(step, deadline);
    } else {
      stages_.lane_backend().run_setup_step(step - 2, deadline);
    }
  }

  void setup_complete() override {
    stages_.node_backend().setup_complete();
    stages_.lane_backend().setup_complete();
  }

  void abort() override {
    if (!stages_.has_backends()) return;
    stages_.node_backend().abort();
    stages_.lane_backend().abort();
  }
  // The lanes' engine (Gloo's connections, MPI's communicator) ends with the backend.
  void announce_close() override {
    if (stages_.has_backends()) stages_.node_backend().announce_close();
  }

  std::vector<StageTime> stage_times() const override { return stages_.stage_times(); }

  void run(const Call& c) override {
    switch (c.op) {
      case Op::kAllReduce:
        return hier_all_reduce(stages_, c);
      case Op::kAllGather:
        return per_rank_counts(c) ? hier_all_gatherv(stages_, c) : hier_all_gather(stages_, c);
      case Op::kReduceScatter:
        return per_rank_counts(c) ? hier_reduce_scatterv(stages_, c)
                                  : hier_reduce_scatter(stages_, c);
      case Op::kAllToAll:
        return c.send_counts != nullptr ? hier_all_to_allv(stages_, c)
                                        : hier_all_to_all(stages_, c);
      case Op::kGather:
        return hier_gather(stages_, c);
      case Op::kScatter:
        return hier_scatter(stages_, c);
      case Op::kReduce:
        return hier_reduce(stages_, c);
      case Op::kAllReduceRmsNorm:  // the dispatch sends its float32 all-reduce (fuses_rmsnorm)
      case Op::kSendRecv:
        break;
    }
    throw Error(ErrorCode::kInternal,
                fmt::format("hier runs no {} (the plan gives point-to-point messages to gloo; the "
                            "dispatch runs all_reduce_rmsnorm's all-reduce here, unfused)",
                            to_string(c.op)));
  }

 private:
  HierStages stages_;
};

}  // namespace

std::unique_ptr<CollectiveBackend> make_hier_backend(const BackendContext& context) {
  return std::make_unique<HierBackend>(context, LaneEngine::kGloo);
}

std::unique_ptr<CollectiveBackend> make_hier_mpi_backend(const BackendContext& context) {
  return std::make_unique<HierBackend>(context, LaneEngine::kMpi);
}

}  // namespace tpcomm::transport
