// What every hier call is built from: the node group (this node's ranks, over shm) and the lane
// (the ranks of this local index on every node, over Gloo or MPI), each a backend of its own, and
// the stage buffers kept from call to call. The ops (hier_ops.hpp) run their stages through it.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hier_blocks.hpp"
#include "tpcomm/stage_time.hpp"
#include "transport/common/backend.hpp"
#include "transport/common/backend_context.hpp"

namespace tpcomm::transport {

// What carries the lanes between nodes.
enum class LaneEngine { kGloo, kMpi };

// The stage buffers: each grows to the largest call's needs and stays (allocating megabytes
// afresh in every call cost a page fault per page: perf, 4 ranks on two simulated nodes, a
// 16 MiB all-gather spent most of its 300 ms zeroing new pages). Memory from operator new:
// aligned for any element.
enum class Scratch { kWide, kWideMine, kBytes, kBytesNode, kCount };

class HierStages {
 public:
  HierStages(BackendContext context, LaneEngine engine)
      : ctx_(std::move(context)), engine_(engine) {}

  // Set-up step 0: the node group and the lane, and their backends (not yet set up).
  void make_groups();
  CollectiveBackend& node_backend() { return *shm_; }
  CollectiveBackend& lane_backend() { return *lane_engine_; }
  bool has_backends() const { return shm_ && lane_engine_; }
  bool mpi() const { return engine_ == LaneEngine::kMpi; }

  // One stage of the user's call `outer` on the node group (shm) or along the lane: numbered as
  // `outer`, compared with it across the stage's ranks, timed, and its errors naming the
  // stage's ranks by their global numbers. A lane stage runs Gloo's (or MPI's) own algorithms.
  void on_node(const Call& outer, Call stage);
  void on_lane(const Call& outer, Call stage);

  std::size_t nodes() const { return rank_at_.size(); }
  std::size_t local_size() const { return static_cast<std::size_t>(local_size_); }
  std::size_t local_index() const { return static_cast<std::size_t>(local_index_); }
  std::size_t node_index() const { return static_cast<std::size_t>(node_index_); }
  std::size_t world_size() const { return ctx_.node_of_rank.size(); }
  // [node index][local index]: the global rank.
  const RankAt& rank_at() const { return rank_at_; }
  // Where global `rank` is: its node index and local index.
  std::size_t node_of(int rank) const { return place_[static_cast<std::size_t>(rank)].first; }
  std::size_t local_of(int rank) const { return place_[static_cast<std::size_t>(rank)].second; }

  // A stage buffer of at least `bytes`.
  std::uint8_t* scratch(Scratch which, std::size_t bytes);

  std::vector<StageTime> stage_times() const;

 private:
  struct SubGroup {
    std::string name;
    std::vector<int> ranks;  // global rank of each sub-group rank
  };
  enum StageIndex { kIntraNode = 0, kInterNode = 1 };
  void in_stage(const SubGroup& group, StageIndex index, CollectiveBackend& backend,
                const Call& stage);

  BackendContext ctx_;
  LaneEngine engine_;
  int local_size_ = 1, local_index_ = 0, node_index_ = 0;
  RankAt rank_at_;
  std::vector<std::pair<std::size_t, std::size_t>> place_;  // [rank]: node index, local index
  SubGroup node_group_, lane_;
  std::unique_ptr<CollectiveBackend> shm_;
  std::unique_ptr<CollectiveBackend> lane_engine_;  // Gloo or MPI
  std::array<std::vector<std::uint8_t>, static_cast<std::size_t>(Scratch::kCount)> scratch_;
  std::atomic<std::int64_t> stage_ns_[2] = {};  // [StageIndex]: steady-clock nanoseconds
};

}  // namespace tpcomm::transport
