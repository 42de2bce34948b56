// hier and hier_mpi: node groups for shm over the group's store, lanes for Gloo (over the same
// store) or for MPI (split from mpirun's world); voted set-up steps (the shm pair, then the
// lane's), and the all-reduce, all-gather and reduce-scatter each as stages over the two.
#include "hier_backend.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <vector>

#include <fmt/format.h>

#include "hier_blocks.hpp"
#include "hier_stage_type.hpp"
#include "kernels/cpu/convert.hpp"
#include "tpcomm/error.hpp"
#include "transport/gloo/gloo_backend.hpp"
#include "transport/hier_mpi/hier_mpi_backend.hpp"
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

// What carries the lanes between nodes.
enum class LaneEngine { kGloo, kMpi };

class HierBackend final : public CollectiveBackend {
 public:
  HierBackend(BackendContext context, LaneEngine engine)
      : ctx_(std::move(context)), engine_(engine) {}

  Backend kind() const override { return mpi() ? Backend::kHierMpi : Backend::kHier; }
  int setup_steps() const override { return mpi() ? 3 : 4; }
  std::string setup_step_name(int step) const override {
    static const char* gloo[] = {"hier.shm.create", "hier.shm.map", "hier.gloo.device",
                                 "hier.gloo.connect"};
    static const char* mpi_lanes[] = {"hier_mpi.shm.create", "hier_mpi.shm.map",
                                      "hier_mpi.mpi.split"};
    return mpi() ? mpi_lanes[step] : gloo[step];
  }

  void run_setup_step(int step, const Deadline& deadline) override {
    if (step == 0) make_groups();
    if (step < 2) {
      shm_->run_setup_step(step, deadline);
    } else {
      lane_engine_->run_setup_step(step - 2, deadline);
    }
  }

  void setup_complete() override {
    shm_->setup_complete();
    lane_engine_->setup_complete();
  }

  void abort() override {
    if (shm_) shm_->abort();
    if (lane_engine_) lane_engine_->abort();
  }
  // The lanes' engine (Gloo's connections, MPI's communicator) ends with the backend.
  void announce_close() override {
    if (shm_) shm_->announce_close();
  }

  std::vector<StageTime> stage_times() const override {
    using std::chrono::nanoseconds;
    return {{"hier intra-node (shm)", nanoseconds(stage_ns_[kIntraNode].load())},
            {mpi() ? "hier inter-node (mpi)" : "hier inter-node (gloo)",
             nanoseconds(stage_ns_[kInterNode].load())}};
  }

  void run(const Call& c) override {
    if (c.op == Op::kAllToAll) return all_to_all(c);
    if (c.op == Op::kAllGather) return all_gather(c);
    if (c.op == Op::kReduceScatter) return reduce_scatter(c);
    all_reduce(c);
  }

 private:
  // A reduce-scatter inside the node, an all-reduce of each 1/L slice along the lane, an
  // all-gather inside the node; in the stage type throughout, one rounding at the end.
  void all_reduce(const Call& c) {
    const std::size_t l = static_cast<std::size_t>(local_size_);
    const std::size_t per = (c.count + l - 1) / l;
    const ReduceOp stage_op = c.reduce == ReduceOp::kAvg ? ReduceOp::kSum : c.reduce;
    const DataType st = stage_type(c.type);
    const std::size_t ses = size_of(st);
    std::uint8_t* full = scratch(wide_, per * l * ses);
    std::uint8_t* mine = scratch(wide_mine_, per * ses);
    widen(c.input, c.type, c.count, full);
    std::fill(full + c.count * ses, full + per * l * ses, 0);  // the last slice's padding
    in_stage(node_group_, kIntraNode, [&] {
      shm_->run({.op = Op::kReduceScatter,
                 .input = full,
                 .output = mine,
                 .count = per,
                 .type = st,
                 .reduce = stage_op,
                 .algorithm = Algorithm::kOneShot,
                 .sequence = c.sequence,
                 .outer = &c});
    });
    in_stage(lane_, kInterNode, [&] {
      lane_engine_->run({.op = Op::kAllReduce,
                         .input = mine,
                         .output = mine,
                         .count = per,
                         .type = st,
                         .reduce = stage_op,
                         .algorithm = Algorithm::kGloo,
                         .sequence = c.sequence,
                         .outer = &c});
    });
    node_all_gather(c, mine, full, per, st);
    if (c.reduce == ReduceOp::kAvg) divide(full, c.count);
    narrow(full, c.type, c.count, c.output);
  }

  // Along the lane first: each rank's input crosses to the other nodes once ((N - 1) blocks
  // per rank, the least any all-gather sends between nodes), then the node gathers its lanes'
  // results over shm, and the blocks are put in rank order (nodes need not hold consecutive
  // ranks).
  void all_gather(const Call& c) {
    const std::size_t n = rank_at_.size();
    const std::size_t l = static_cast<std::size_t>(local_size_);
    const std::size_t block = c.count * size_of(c.type);
    std::uint8_t* lane_blocks = scratch(bytes_, n * block);  // [node]: that node's rank of my lane
    std::uint8_t* node_blocks = scratch(bytes_node_, l * n * block);  // [local index][node]
    in_stage(lane_, kInterNode, [&] {
      lane_engine_->run({.op = Op::kAllGather,
                         .input = c.input,
                         .output = lane_blocks,
                         .count = c.count,
                         .type = c.type,
                         .algorithm = Algorithm::kGloo,
                         .sequence = c.sequence,
                         .outer = &c});
    });
    node_all_gather(c, lane_blocks, node_blocks, n * c.count, c.type);
    blocks_in_rank_order(node_blocks, static_cast<std::uint8_t*>(c.output), rank_at_, block);
  }

  // Two equal exchanges: along the lane first, each rank sending every other node the blocks
  // for that node's ranks (so every block crosses between nodes once, in one message per pair
  // of nodes), then inside the node, each rank handing every local rank the blocks its lane
  // brought for it; then the blocks in rank order. No per-peer counts (all_to_allv goes to the
  // fallback: the dispatch).
  void all_to_all(const Call& c) {
    const std::size_t n = rank_at_.size();
    const std::size_t l = static_cast<std::size_t>(local_size_);
    const std::size_t block = c.count * size_of(c.type);
    std::uint8_t* by_node = scratch(bytes_, n * l * block);  // [node][local index]
    blocks_by_node(static_cast<const std::uint8_t*>(c.input), by_node, rank_at_, block);
    // [node][local index]: from my lane's rank on that node, its block for that local rank here.
    std::uint8_t* from_lane = scratch(bytes_node_, n * l * block);
    in_stage(lane_, kInterNode, [&] {
      lane_engine_->run({.op = Op::kAllToAll,
                         .input = by_node,
                         .output = from_lane,
                         .count = l * c.count,
                         .type = c.type,
                         .algorithm = Algorithm::kGloo,
                         .sequence = c.sequence,
                         .outer = &c});
    });
    std::uint8_t* by_local = scratch(wide_, l * n * block);  // [local index][node]
    transpose_blocks(from_lane, by_local, n, l, block);
    // [local index][node]: the block of rank (node, local index) for this rank.
    std::uint8_t* mine = scratch(wide_mine_, l * n * block);
    in_stage(node_group_, kIntraNode, [&] {
      shm_->run({.op = Op::kAllToAll,
                 .input = by_local,
                 .output = mine,
                 .count = n * c.count,
                 .type = c.type,
                 .algorithm = Algorithm::kOneShot,
                 .sequence = c.sequence,
                 .outer = &c});
    });
    blocks_in_rank_order(mine, static_cast<std::uint8_t*>(c.output), rank_at_, block);
  }

  // Inside the node first: local rank i is left the node's sum of the blocks of every node's
  // rank i, then the lane reduce-scatters those, so only 1/L of the input crosses between nodes.
  // In the stage type throughout, one rounding at the end.
  void reduce_scatter(const Call& c) {
    const std::size_t n = rank_at_.size();
    const std::size_t l = static_cast<std::size_t>(local_size_);
    const std::size_t es = size_of(c.type);
    const ReduceOp stage_op = c.reduce == ReduceOp::kAvg ? ReduceOp::kSum : c.reduce;
    const DataType st = stage_type(c.type);
    const std::size_t ses = size_of(st);
    // [local index][node]: the input, regrouped
    std::uint8_t* by_lane = scratch(wide_, l * n * c.count * ses);
    const auto* in = static_cast<const std::uint8_t*>(c.input);
    for (std::size_t i = 0; i < l; ++i) {
      for (std::size_t node = 0; node < n; ++node) {
        const auto rank = static_cast<std::size_t>(rank_at_[node][i]);
        widen(in + rank * c.count * es, c.type, c.count, by_lane + (i * n + node) * c.count * ses);
      }
    }
    std::uint8_t* lane_sums = scratch(wide_mine_, n * c.count * ses);
    in_stage(node_group_, kIntraNode, [&] {
      shm_->run({.op = Op::kReduceScatter,
                 .input = by_lane,
                 .output = lane_sums,
                 .count = n * c.count,
                 .type = st,
                 .reduce = stage_op,
                 .algorithm = Algorithm::kOneShot,
                 .sequence = c.sequence,
                 .outer = &c});
    });
    std::uint8_t* mine = scratch(wide_, c.count * ses);  // by_lane is read: its memory serves again
    in_stage(lane_, kInterNode, [&] {
      lane_engine_->run({.op = Op::kReduceScatter,
                         .input = lane_sums,
                         .output = mine,
                         .count = c.count,
                         .type = st,
                         .reduce = stage_op,
                         .algorithm = Algorithm::kGloo,
                         .sequence = c.sequence,
                         .outer = &c});
    });
    if (c.reduce == ReduceOp::kAvg) divide(mine, c.count);
    narrow(mine, c.type, c.count, c.output);
  }

  // The node stage's all-gather of `count` elements per local rank.
  void node_all_gather(const Call& c, const void* input, void* output, std::size_t count,
                       DataType type) {
    in_stage(node_group_, kIntraNode, [&] {
      shm_->run({.op = Op::kAllGather,
                 .input = input,
                 .output = output,
                 .count = count,
                 .type = type,
                 .algorithm = node_gather_algorithm(count * size_of(type), local_size_),
                 .sequence = c.sequence,
                 .outer = &c});
    });
  }

  // Avg: floating-point calls only, so the stage buffer holds fp32.
  void divide(std::uint8_t* stage, std::size_t count) const {
    auto* values = reinterpret_cast<float*>(stage);
    const float w = static_cast<float>(ctx_.node_of_rank.size());
    for (std::size_t i = 0; i < count; ++i) values[i] /= w;
  }

  // A stage buffer of at least n elements, kept from call to call: allocating megabytes afresh
  // in every call cost a page fault per page (perf, 4 ranks on two simulated nodes: a 16 MiB
  // all-gather spent most of its 300 ms zeroing new pages).
  template <typename T>
  static T* scratch(std::vector<T>& buffer, std::size_t n) {
    if (buffer.size() < n) buffer.resize(n);
    return buffer.data();
  }

  // A sub-group numbers its ranks from 0: a stage's error names them, so it is prefixed with
  // the group's global ranks in that order.
  struct SubGroup {
    std::string name;
    std::vector<int> ranks;  // global rank of each sub-group rank
  };
  // The stages a call's time is split into (stage_times): where its ranks wait for each other.
  enum StageIndex { kIntraNode = 0, kInterNode = 1 };
  template <typename Stage>
  void in_stage(const SubGroup& group, StageIndex index, Stage stage) {
    const auto start = std::chrono::steady_clock::now();
    struct Clocked {  // counted however the stage ends
      std::chrono::steady_clock::time_point start;
      std::atomic<std::int64_t>& total;
      ~Clocked() {
        total.fetch_add((std::chrono::steady_clock::now() - start).count(),
                        std::memory_order_relaxed);
      }
    } clocked{start, stage_ns_[index]};
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
    rank_at_.clear();
    for (const auto& [node, ranks] : nodes) {
      lane_.ranks.push_back(ranks[static_cast<std::size_t>(local_index)]);
      rank_at_.push_back(ranks);
    }
    const std::string prefix = fmt::format("tpcomm/c{:016x}/hier", ctx_.comm_id);
    auto store = ctx_.bootstrap->store();
    auto node_bs = make_store_bootstrap(store, local_index, local_size_,
                                        fmt::format("{}/node{}", prefix, my_node));
    // Each sub-group is a backend of its own, with its own comm id (segment and key names).
    BackendContext node_ctx = ctx_;
    node_ctx.rank = local_index;
    node_ctx.size = local_size_;
    node_ctx.bootstrap = node_bs;
    node_ctx.comm_id = ctx_.comm_id ^ static_cast<std::uint64_t>(my_node + 1);
    node_ctx.node_of_rank.clear();
    node_ctx.shm.registered =
        nullptr;  // its stage buffers are its own, and its ranks are node-local
    shm_ = make_shm_backend(node_ctx);
    BackendContext lane_ctx = ctx_;
    lane_ctx.rank = node_index;
    lane_ctx.size = static_cast<int>(nodes.size());
    lane_ctx.comm_id = ctx_.comm_id ^ (static_cast<std::uint64_t>(local_index + 1) << 32);
    if (mpi()) {
      lane_engine_ = make_mpi_lane(lane_ctx, group_world(), local_index, node_index);
    } else {
      lane_ctx.bootstrap = make_store_bootstrap(store, node_index, lane_ctx.size,
                                                fmt::format("{}/lane{}", prefix, local_index));
      lane_engine_ = make_gloo_backend(lane_ctx);
    }
  }

  // The MPI world the lanes split from: the group's own bootstrap's, numbered as the group is.
  control::MpiWorld group_world() const {
    std::string why;
    auto world = control::mpi_world_of(*ctx_.bootstrap, &why);
    if (!world) throw Error(ErrorCode::kUnavailable, "hier_mpi needs an MPI world: " + why);
    if (world->rank != ctx_.rank || world->size != ctx_.size) {
      throw Error(ErrorCode::kUnavailable,
                  fmt::format("hier_mpi needs the group to be mpirun's whole world: this rank is "
                              "{} of {} in the group, {} of {} in the world",
                              ctx_.rank, ctx_.size, world->rank, world->size));
    }
    return *world;
  }

  bool mpi() const { return engine_ == LaneEngine::kMpi; }

  BackendContext ctx_;
  LaneEngine engine_;
  int local_size_ = 1;
  std::vector<std::vector<int>> rank_at_;  // [node index][local index]: the global rank
  // Stage buffers (scratch): they grow to the largest call's needs and stay.
  // Stage-type buffers (fp32 or an integer type): aligned for any element by operator new.
  std::vector<std::uint8_t> wide_, wide_mine_;
  std::vector<std::uint8_t> bytes_, bytes_node_;
  SubGroup node_group_, lane_;
  std::unique_ptr<CollectiveBackend> shm_;
  std::unique_ptr<CollectiveBackend> lane_engine_;  // Gloo or MPI
  std::atomic<std::int64_t> stage_ns_[2] = {};      // [StageIndex]: steady-clock nanoseconds
};

}  // namespace

std::unique_ptr<CollectiveBackend> make_hier_backend(const BackendContext& context) {
  return std::make_unique<HierBackend>(context, LaneEngine::kGloo);
}

std::unique_ptr<CollectiveBackend> make_hier_mpi_backend(const BackendContext& context) {
  return std::make_unique<HierBackend>(context, LaneEngine::kMpi);
}

}  // namespace tpcomm::transport
