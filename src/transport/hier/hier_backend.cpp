// hier: sub-groups over the same store (node groups for shm, lanes for Gloo), four voted set-up
// steps (the shm pair, then the Gloo pair), and the three-stage all-reduce.
#include "hier_backend.hpp"

#include <algorithm>
#include <map>
#include <vector>

#include <fmt/format.h>

#include "tpcomm/error.hpp"
#include "transport/common/convert.hpp"
#include "transport/gloo/gloo_backend.hpp"
#include "transport/shm/shm_backend.hpp"

namespace tpcomm::transport {
namespace {

// The node stage's all-gather, as the built-in cpu table gathers (docs/tuning.md): each peer's
// slice read where it lies for two ranks per node above 16 KiB per rank (outputs above 32 KiB),
// else through the lanes.
// Every rank of a node gathers slices of the same size, so they all pick the same.
Algorithm node_gather_algorithm(std::size_t slice_bytes, int local_size) {
  return local_size == 2 && slice_bytes > (16 << 10) ? Algorithm::kSingleCopy : Algorithm::kOneShot;
}

class HierBackend final : public CollectiveBackend {
 public:
  explicit HierBackend(BackendContext context) : ctx_(std::move(context)) {}

  Backend kind() const override { return Backend::kHier; }
  int setup_steps() const override { return 4; }
  std::string setup_step_name(int step) const override {
    static const char* names[] = {"hier.shm.create", "hier.shm.map", "hier.gloo.device",
                                  "hier.gloo.connect"};
    return names[step];
  }

  void run_setup_step(int step, const Deadline& deadline) override {
    if (step == 0) make_groups();
    if (step < 2) {
      shm_->run_setup_step(step, deadline);
    } else {
      gloo_->run_setup_step(step - 2, deadline);
    }
  }

  void setup_complete() override {
    shm_->setup_complete();
    gloo_->setup_complete();
  }

  void abort() override {
    if (shm_) shm_->abort();
    if (gloo_) gloo_->abort();
  }

  void run(const Call& c) override {
    if (c.op != Op::kAllReduce) {
      throw Error(ErrorCode::kInternal,
                  "hier serves all_reduce only (the plan never routes other ops to it)");
    }
    const std::size_t l = static_cast<std::size_t>(local_size_);
    const std::size_t per = (c.count + l - 1) / l;
    const ReduceOp stage_op = c.reduce == ReduceOp::kAvg ? ReduceOp::kSum : c.reduce;
    std::vector<float> full(per * l, 0.0f);
    std::vector<float> mine(per);
    to_float(c.input, c.type, c.count, full.data());
    in_stage(node_group_, [&] {
      shm_->run({.op = Op::kReduceScatter,
                 .input = full.data(),
                 .output = mine.data(),
                 .count = per,
                 .type = DataType::kFloat32,
                 .reduce = stage_op,
                 .algorithm = Algorithm::kOneShot,
                 .sequence = c.sequence,
                 .outer = &c});
    });
    in_stage(lane_, [&] {
      gloo_->run({.op = Op::kAllReduce,
                  .input = mine.data(),
                  .output = mine.data(),
                  .count = per,
                  .type = DataType::kFloat32,
                  .reduce = stage_op,
                  .algorithm = Algorithm::kGloo,
                  .sequence = c.sequence,
                  .outer = &c});
    });
    in_stage(node_group_, [&] {
      shm_->run({.op = Op::kAllGather,
                 .input = mine.data(),
                 .output = full.data(),
                 .count = per,
                 .type = DataType::kFloat32,
                 .algorithm = node_gather_algorithm(per * sizeof(float), local_size_),
                 .sequence = c.sequence,
                 .outer = &c});
    });
    if (c.reduce == ReduceOp::kAvg) {
      const float w = static_cast<float>(ctx_.node_of_rank.size());
      for (std::size_t i = 0; i < c.count; ++i) full[i] /= w;
    }
    from_float(full.data(), c.type, c.count, c.output);
  }

 private:
  // A sub-group numbers its ranks from 0: a stage's error names them, so it is prefixed with
  // the group's global ranks in that order.
  struct SubGroup {
    std::string name;
    std::vector<int> ranks;  // global rank of each sub-group rank
  };
  template <typename Stage>
  static void in_stage(const SubGroup& group, Stage stage) {
    try {
      stage();
    } catch (const Error& e) {
      throw Error(e.code(),
                  fmt::format("{} (its ranks 0-{} are ranks {}): {}", group.name,
                              group.ranks.size() - 1, fmt::join(group.ranks, ", "), e.what()));
    }
  }

  // Node group: the ranks of this node, in rank order. Lane: the ranks with this local index on
  // every node, in node order. Both rendezvous over the parent's store under their own prefix.
  void make_groups() {
    std::map<int, std::vector<int>> nodes;
    for (std::size_t r = 0; r < ctx_.node_of_rank.size(); ++r) {
      nodes[ctx_.node_of_rank[r]].push_back(static_cast<int>(r));
    }
    std::vector<std::string> sizes;
    for (const auto& [node, ranks] : nodes)
      sizes.push_back(fmt::format("node {}: {}", node, ranks.size()));
    for (const auto& [node, ranks] : nodes) {
      if (ranks.size() != nodes.begin()->second.size()) {
        throw Error(ErrorCode::kUnavailable,
                    fmt::format("hier needs the same number of ranks on every node ({})",
                                fmt::join(sizes, ", ")));
      }
    }
    const int my_node = ctx_.node_of_rank[static_cast<std::size_t>(ctx_.rank)];
    const auto& local = nodes[my_node];
    local_size_ = static_cast<int>(local.size());
    const int local_index =
        static_cast<int>(std::find(local.begin(), local.end(), ctx_.rank) - local.begin());
    int node_index = 0;
    for (const auto& [node, ranks] : nodes) {
      if (node == my_node) break;
      ++node_index;
    }
    node_group_ = {"node group", local};
    lane_ = {"lane", {}};
    for (const auto& [node, ranks] : nodes)
      lane_.ranks.push_back(ranks[static_cast<std::size_t>(local_index)]);
    const std::string prefix = fmt::format("tpcomm/c{:016x}/hier", ctx_.comm_id);
    auto store = ctx_.bootstrap->store();
    auto node_bs = make_store_bootstrap(store, local_index, local_size_,
                                        fmt::format("{}/node{}", prefix, my_node));
    auto lane_bs = make_store_bootstrap(store, node_index, static_cast<int>(nodes.size()),
                                        fmt::format("{}/lane{}", prefix, local_index));
    // Each sub-group is a backend of its own, with its own comm id (segment and key names).
    BackendContext node_ctx = ctx_;
    node_ctx.rank = local_index;
    node_ctx.size = local_size_;
    node_ctx.bootstrap = node_bs;
    node_ctx.comm_id = ctx_.comm_id ^ static_cast<std::uint64_t>(my_node + 1);
    node_ctx.node_of_rank.clear();
    node_ctx.registered = nullptr;  // its stage buffers are its own, and its ranks are node-local
    shm_ = make_shm_backend(node_ctx);
    BackendContext lane_ctx = ctx_;
    lane_ctx.rank = node_index;
    lane_ctx.size = static_cast<int>(nodes.size());
    lane_ctx.bootstrap = lane_bs;
    lane_ctx.comm_id = ctx_.comm_id ^ (static_cast<std::uint64_t>(local_index + 1) << 32);
    gloo_ = make_gloo_backend(lane_ctx);
  }

  BackendContext ctx_;
  int local_size_ = 1;
  SubGroup node_group_, lane_;
  std::unique_ptr<CollectiveBackend> shm_;
  std::unique_ptr<CollectiveBackend> gloo_;
};

}  // namespace

std::unique_ptr<CollectiveBackend> make_hier_backend(const BackendContext& context) {
  return std::make_unique<HierBackend>(context);
}

}  // namespace tpcomm::transport
