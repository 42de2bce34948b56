// hier's node group and lane (hier_stages.hpp).
#include "hier_stages.hpp"

#include <algorithm>
#include <chrono>
#include <map>

#include <fmt/format.h>

#include "tpcomm/bootstrap.hpp"
#include "tpcomm/error.hpp"
#include "transport/gloo/gloo_backend.hpp"
#include "transport/hier_mpi/hier_mpi_backend.hpp"
#include "transport/shm/shm_backend.hpp"

namespace tpcomm::transport {
namespace {

// The MPI world the lanes split from: the group's own bootstrap's, numbered as the group is.
control::MpiWorld group_world(const BackendContext& ctx) {
  std::string why;
  auto world = control::mpi_world_of(*ctx.bootstrap, &why);
  if (!world) throw Error(ErrorCode::kUnavailable, "hier_mpi needs an MPI world: " + why);
  if (world->rank != ctx.rank || world->size != ctx.size) {
    throw Error(ErrorCode::kUnavailable,
                fmt::format("hier_mpi needs the group to be mpirun's whole world: this rank is "
                            "{} of {} in the group, {} of {} in the world",
                            ctx.rank, ctx.size, world->rank, world->size));
  }
  return *world;
}

}  // namespace

// Node group: the ranks of this node, in rank order. Lane: the ranks with this local index on
// every node, in node order. Both rendezvous over the parent's store under their own prefix.
void HierStages::make_groups() {
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
  local_index_ = static_cast<int>(std::find(local.begin(), local.end(), ctx_.rank) - local.begin());
  node_index_ = static_cast<int>(std::distance(nodes.begin(), nodes.find(my_node)));
  node_group_ = {"node group", local};
  lane_ = {"lane", {}};
  rank_at_.clear();
  place_.assign(ctx_.node_of_rank.size(), {0, 0});
  for (const auto& [node, ranks] : nodes) {
    lane_.ranks.push_back(ranks[static_cast<std::size_t>(local_index_)]);
    for (std::size_t i = 0; i < ranks.size(); ++i)
      place_[static_cast<std::size_t>(ranks[i])] = {rank_at_.size(), i};
    rank_at_.push_back(ranks);
  }
  const std::string prefix = fmt::format("tpcomm/c{:016x}/hier", ctx_.comm_id);
  auto store = ctx_.bootstrap->store();
  // Each sub-group is a backend of its own, with its own comm id (segment and key names).
  BackendContext node_ctx = ctx_;
  node_ctx.rank = local_index_;
  node_ctx.size = local_size_;
  node_ctx.bootstrap = make_store_bootstrap(store, local_index_, local_size_,
                                            fmt::format("{}/node{}", prefix, my_node));
  node_ctx.comm_id = ctx_.comm_id ^ static_cast<std::uint64_t>(my_node + 1);
  node_ctx.node_of_rank.clear();
  // Its stage buffers are its own, and its ranks are node-local.
  node_ctx.shm.registered = nullptr;
  shm_ = make_shm_backend(node_ctx);
  BackendContext lane_ctx = ctx_;
  lane_ctx.rank = node_index_;
  lane_ctx.size = static_cast<int>(nodes.size());
  lane_ctx.comm_id = ctx_.comm_id ^ (static_cast<std::uint64_t>(local_index_ + 1) << 32);
  if (mpi()) {
    lane_engine_ = make_mpi_lane(lane_ctx, group_world(ctx_), local_index_, node_index_);
  } else {
    lane_ctx.bootstrap = make_store_bootstrap(store, node_index_, lane_ctx.size,
                                              fmt::format("{}/lane{}", prefix, local_index_));
    lane_engine_ = make_gloo_backend(lane_ctx);
  }
}

// A stage names the user's call: `outer` itself, or the call `outer` is a stage of (the float32
// all-reduce of an unfused all_reduce_rmsnorm, whose rows and eps the ranks then compare too).
namespace {
const Call* user_call(const Call& outer) {
  return outer.outer != nullptr ? outer.outer : &outer;
}
}  // namespace

void HierStages::on_node(const Call& outer, Call stage) {
  stage.sequence = outer.sequence;
  stage.outer = user_call(outer);
  in_stage(node_group_, kIntraNode, *shm_, stage);
}

void HierStages::on_lane(const Call& outer, Call stage) {
  stage.sequence = outer.sequence;
  stage.outer = user_call(outer);
  stage.algorithm = Algorithm::kGloo;
  in_stage(lane_, kInterNode, *lane_engine_, stage);
}

// A sub-group numbers its ranks from 0: a stage's error names them, so it is prefixed with the
// group's global ranks in that order.
void HierStages::in_stage(const SubGroup& group, StageIndex index, CollectiveBackend& backend,
                          const Call& stage) {
  struct Clocked {  // counted however the stage ends
    std::chrono::steady_clock::time_point start;
    std::atomic<std::int64_t>& total;
    ~Clocked() {
      total.fetch_add((std::chrono::steady_clock::now() - start).count(),
                      std::memory_order_relaxed);
    }
  } clocked{std::chrono::steady_clock::now(), stage_ns_[index]};
  try {
    backend.run(stage);
  } catch (const Error& e) {
    throw Error(e.code(),
                fmt::format("{} (its ranks 0-{} are ranks {}): {}", group.name,
                            group.ranks.size() - 1, fmt::join(group.ranks, ", "), e.what()));
  }
}

std::uint8_t* HierStages::scratch(Scratch which, std::size_t bytes) {
  auto& buffer = scratch_[static_cast<std::size_t>(which)];
  // Never empty: a stage of no elements still passes a valid pointer.
  if (buffer.size() < bytes || buffer.empty()) buffer.resize(std::max<std::size_t>(bytes, 1));
  return buffer.data();
}

std::vector<StageTime> HierStages::stage_times() const {
  using std::chrono::nanoseconds;
  return {{"hier intra-node (shm)", nanoseconds(stage_ns_[kIntraNode].load())},
          {mpi() ? "hier inter-node (mpi)" : "hier inter-node (gloo)",
           nanoseconds(stage_ns_[kInterNode].load())}};
}

}  // namespace tpcomm::transport
