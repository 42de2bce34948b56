// Gloo backend: set-up (device, full-mesh connect over our store) and the three collectives.
#include "gloo_backend.hpp"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "common/log_format.hpp"
#include "control/socket_util.hpp"
#include "control/store_auth.hpp"
#include "gloo_exchange_ops.hpp"
#include "gloo_group.hpp"
#include "gloo_integer_calls.hpp"
#include "gloo_opening_exchange.hpp"
#include "gloo_pairs.hpp"
#include "gloo_peer_messages.hpp"
#include "gloo_ring_reduce_scatter.hpp"
#include "gloo_store_adapter.hpp"
#include "gloo_worker.hpp"
#include "kernels/cpu/convert.hpp"
#include "kernels/cpu/int_reduce.hpp"
#include "tpcomm/error.hpp"
#include "transport/common/call_identity.hpp"
#include "transport/common/call_sizes.hpp"
#include "transport/common/sigpipe_guard.hpp"
#include "transport/common/unpinned_threads.hpp"

namespace tpcomm::transport {
namespace {

void sum_fn(void* c, const void* a, const void* b, std::size_t n) {
  auto* out = static_cast<float*>(c);
  const auto* x = static_cast<const float*>(a);
  const auto* y = static_cast<const float*>(b);
  for (std::size_t i = 0; i < n; ++i) out[i] = x[i] + y[i];
}
void max_fn(void* c, const void* a, const void* b, std::size_t n) {
  auto* out = static_cast<float*>(c);
  const auto* x = static_cast<const float*>(a);
  const auto* y = static_cast<const float*>(b);
  for (std::size_t i = 0; i < n; ++i) out[i] = std::max(x[i], y[i]);
}
void min_fn(void* c, const void* a, const void* b, std::size_t n) {
  auto* out = static_cast<float*>(c);
  const auto* x = static_cast<const float*>(a);
  const auto* y = static_cast<const float*>(b);
  for (std::size_t i = 0; i < n; ++i) out[i] = std::min(x[i], y[i]);
}

GlooReduceFn reduce_fn(ReduceOp op) {
  switch (op) {
    case ReduceOp::kMax:
      return max_fn;
    case ReduceOp::kMin:
      return min_fn;
    default:
      return sum_fn;
  }
}

// Avg is a sum divided once, at the end (as NCCL's and the shm path's avg).
void divide_if_avg(const GlooGroup& g, float* data, std::size_t count, ReduceOp op) {
  if (op != ReduceOp::kAvg) return;
  const float w = static_cast<float>(g.size);
  for (std::size_t i = 0; i < count; ++i) data[i] /= w;
}

// Reduces `count` fp32 values in place across ranks.
void reduce_floats(const GlooGroup& g, float* data, std::size_t count, ReduceOp op,
                   std::uint64_t sequence) {
  if (count == 0) return;
  gloo::AllreduceOptions opts(g.context);
  opts.setOutput(data, count);
  opts.setReduceFunction(gloo::AllreduceOptions::Func(reduce_fn(op)));
  opts.setTag(data_tag(sequence));
  opts.setTimeout(g.timeout);
  gloo::allreduce(opts);
  divide_if_avg(g, data, count, op);
}

// Gloo's all-gather of `bytes` per rank, in place in `out` (this rank's block already there).
void gather_blocks(const GlooGroup& g, std::uint8_t* out, std::size_t bytes,
                   std::uint64_t sequence) {
  gloo::AllgatherOptions opts(g.context);
  opts.setOutput(out, bytes * static_cast<std::size_t>(g.size));
  opts.setTag(data_tag(sequence));
  opts.setTimeout(g.timeout);
  gloo::allgather(opts);
}

// fp16 / bf16: the ring reduce-scatter in fp32 over blocks padded to the same length, each rank
// rounds its block once, and Gloo all-gathers the rounded blocks in the call's type. Half the
// bytes of an fp32 all-reduce, and the same bits (every rank rounds the same fp32 sums).
// `padded`: the job's room for the call's input padded to whole blocks (its staged input, which
// an all-reduce staged in its output leaves free).
void all_reduce_narrow(const GlooGroup& g, const Call& c, std::vector<std::uint8_t>& padded,
                       std::vector<float>& wide, GlooRingScratch& ring) {
  const auto w = static_cast<std::size_t>(g.size);
  const std::size_t es = size_of(c.type);
  const std::size_t block = (c.count + w - 1) / w;
  padded.resize(block * w * es);
  std::memcpy(padded.data(), c.input, c.count * es);
  std::memset(padded.data() + c.count * es, 0, padded.size() - c.count * es);
  if (wide.size() < block * w) wide.resize(block * w);
  to_float(padded.data(), c.type, block * w, wide.data());
  gloo_ring_reduce_scatter(*g.context, wide.data(), padded.data(), c.type, block,
                           reduce_fn(c.reduce), data_tag(c.sequence), g.timeout, ring);
  float* mine = wide.data() + static_cast<std::size_t>(g.rank) * block;
  divide_if_avg(g, mine, block, c.reduce);
  from_float(mine, c.type, block, padded.data() + static_cast<std::size_t>(g.rank) * block * es);
  gather_blocks(g, padded.data(), block * es, c.sequence);
  std::memcpy(c.output, padded.data(), c.count * es);
}

void all_reduce(const GlooGroup& g, const Call& c) {
  auto* out = static_cast<float*>(c.output);
  if (c.input != c.output) std::memcpy(out, c.input, c.count * sizeof(float));
  reduce_floats(g, out, c.count, c.reduce, c.sequence);
}

void all_gather(const GlooGroup& g, const Call& c) {
  const std::size_t bytes = c.count * size_of(c.type);
  if (bytes == 0) return;
  auto* out = static_cast<std::uint8_t*>(c.output);
  std::memcpy(out + static_cast<std::size_t>(g.rank) * bytes, c.input, bytes);
  gather_blocks(g, out, bytes, c.sequence);
}

// A ring reduce-scatter in fp32: of a float32 input in the job's own copy of it, of fp16 / bf16
// in `wide`; one rounding to the call's type at the end.
void reduce_scatter(const GlooGroup& g, const Call& c, std::vector<float>& wide,
                    GlooRingScratch& ring) {
  const std::size_t total = c.count * static_cast<std::size_t>(g.size);
  if (total == 0) return;
  float* values = nullptr;
  if (c.type == DataType::kFloat32) {
    values = static_cast<float*>(const_cast<void*>(c.input));  // the job's copy (StagedCall)
  } else {
    if (wide.size() < total) wide.resize(total);
    to_float(c.input, c.type, total, wide.data());
    values = wide.data();
  }
  gloo_ring_reduce_scatter(*g.context, values, c.input, c.type, c.count, reduce_fn(c.reduce),
                           data_tag(c.sequence), g.timeout, ring);
  float* mine = values + static_cast<std::size_t>(g.rank) * c.count;
  divide_if_avg(g, mine, c.count, c.reduce);
  from_float(mine, c.type, c.count, c.output);
}

// A call whose data came with the opening exchange: every rank combines the same parts in rank
// order, so the results agree bit for bit. `wide`: fp32 room for 2 * count values.
void finish_inline(const GlooGroup& g, const Call& c, const OpeningExchange& x,
                   std::vector<float>& wide) {
  const std::size_t bytes = c.count * size_of(c.type);
  const bool gathers =
      c.op == Op::kAllGather || c.op == Op::kAllToAll || (c.op == Op::kGather && g.rank == c.root);
  if (c.op == Op::kGather && !gathers) return;  // off the root: nothing to keep
  if (gathers) {
    auto* out = static_cast<std::uint8_t*>(c.output);
    for (int r = 0; r < g.size; ++r) {
      std::memcpy(out + static_cast<std::size_t>(r) * bytes, x.data_from(r), bytes);
    }
    return;
  }
  if (!is_floating(c.type)) {
    std::vector<const void*> parts(static_cast<std::size_t>(g.size));
    for (int r = 0; r < g.size; ++r) parts[static_cast<std::size_t>(r)] = x.data_from(r);
    return kernels::cpu::reduce_ints(parts.data(), g.size, c.count, c.type, c.reduce, c.output);
  }
  const GlooReduceFn reduce = reduce_fn(c.reduce);
  if (wide.size() < 2 * c.count) wide.resize(2 * c.count);
  float* sum = wide.data();
  float* part = wide.data() + c.count;
  to_float(x.data_from(0), c.type, c.count, sum);
  for (int r = 1; r < g.size; ++r) {
    to_float(x.data_from(r), c.type, c.count, part);
    reduce(sum, sum, part, c.count);
  }
  divide_if_avg(g, sum, c.count, c.reduce);
  from_float(sum, c.type, c.count, c.output);
}

// A call's data in buffers of its own: the caller's may be gone when an abandoned job ends.
// The backend hands the same one to the next call once no job holds it: buffers of megabytes
// allocated afresh in every call cost a page fault per page (perf: most of a 4-rank 16 MiB
// all-reduce's time, on a VM).
struct StagedCall {
  explicit StagedCall(std::size_t room) : opening(room) {}
  void stage(const Call& c, int rank, int size) {
    call = c;
    const std::size_t es = size_of(c.type);
    // A reduce runs as an all-reduce whose result only the root keeps (gloo_exchange_ops.hpp),
    // a reduce_scatterv as one whose result each rank keeps its block of.
    if (c.op == Op::kReduce || (c.op == Op::kReduceScatter && per_rank_counts(c))) {
      call.op = Op::kAllReduce;
    }
    const std::size_t in_bytes = input_elements(call, rank, size) * es;
    output.resize(output_elements(call, rank, size) * es);
    call.output = output.data();
    call.outer = nullptr;
    // An all-reduce works in place in `output`: one copy of the input fewer.
    std::vector<std::uint8_t>& in = call.op == Op::kAllReduce ? output : input;
    in.resize(in_bytes);
    if (in_bytes > 0) std::memcpy(in.data(), c.input, in_bytes);
    call.input = in.data();
    if (c.send_counts != nullptr) {
      send_counts.assign(c.send_counts, c.send_counts + size);
      call.send_counts = send_counts.data();
    }
    if (c.recv_counts != nullptr) {
      recv_counts.assign(c.recv_counts, c.recv_counts + size);
      call.recv_counts = recv_counts.data();
    }
  }
  Call call;
  std::vector<std::uint8_t> input;
  std::vector<std::uint8_t> output;
  std::vector<std::size_t> send_counts, recv_counts;  // all_to_allv's
  std::vector<float> wide;                            // fp32 room of fp16 / bf16 reductions
  GlooRingScratch ring;                               // a reduce-scatter's block in flight
  OpeningExchange opening;
};

void run_staged(const GlooGroup& g, StagedCall& staged, CallIdentity identity) {
  const Call& c = staged.call;
  staged.opening.run(*g.context, c, identity, check_tag(c.sequence), g.timeout);
  if (travels_inline(c, staged.opening.room())) {
    return finish_inline(g, c, staged.opening, staged.wide);
  }
  if (c.op == Op::kAllGather && per_rank_counts(c)) return gloo_all_gatherv(g, c);
  switch (c.op) {
    case Op::kAllToAll:
      return c.send_counts != nullptr ? gloo_all_to_allv(g, c) : gloo_all_to_all(g, c);
    case Op::kGather:
      return gloo_gather(g, c);
    case Op::kScatter:
      return gloo_scatter(g, c);
    default:
      break;
  }
  if (!is_floating(c.type) && c.op != Op::kAllGather) return reduce_integer_call(g, c);
  switch (c.op) {
    case Op::kAllReduce:
      if (c.type == DataType::kFloat32) return all_reduce(g, c);
      return all_reduce_narrow(g, c, staged.input, staged.wide, staged.ring);
    case Op::kAllGather:
      return all_gather(g, c);
    case Op::kReduceScatter:
      return reduce_scatter(g, c, staged.wide, staged.ring);
    default:
      throw Error(ErrorCode::kInternal, fmt::format("gloo: no collective for {}", to_string(c.op)));
  }
}

class GlooBackend final : public CollectiveBackend {
 public:
  explicit GlooBackend(BackendContext context) : ctx_(std::move(context)) {}

  Backend kind() const override { return Backend::kGloo; }
  int setup_steps() const override { return 2; }
  std::string setup_step_name(int step) const override {
    return step == 0 ? "gloo.device" : "gloo.connect";
  }

  void run_setup_step(int step, const Deadline& deadline) override {
    SigpipeGuard no_sigpipe;  // also Gloo's event loop thread, started here, keeps it blocked
    try {
      if (step == 0) {
        // Gloo crashes on an address it cannot resolve: refuse it here, with the reason.
        if (auto why = net::why_cannot_listen_on(ctx_.socket_address)) {
          throw Error(ErrorCode::kInvalidInput,
                      fmt::format("cannot listen on socket address \"{}\" (TPCOMM_SOCKET_ADDRESS, "
                                  "or this host's address toward MASTER_ADDR): {}",
                                  ctx_.socket_address, *why));
        }
        gloo::transport::tcp::attr attr(ctx_.socket_address.c_str());
        UnpinnedThreadScope unpinned;  // Gloo's event loop starts here (unpinned_threads.hpp)
        device_ = gloo::transport::tcp::CreateDevice(attr);
        return;
      }
      adapter_ = std::make_shared<GlooStoreAdapter>(
          ctx_.bootstrap->store(), fmt::format("tpcomm/c{:016x}/gloo/", ctx_.comm_id),
          deadline.remaining());
      const Bytes token = control::random_nonce();
      publish_gloo_member_token(*adapter_, ctx_.rank, token);
      auto context = std::make_shared<gloo::rendezvous::Context>(ctx_.rank, ctx_.size);
      context->setTimeout(ctx_.timeout);
      context->connectFullMesh(*adapter_, device_);
      verify_gloo_members(*context, *adapter_, token, deadline.remaining());
      context_ = context;
      peer_ = std::make_unique<GlooPeerMessages>(context_, ctx_.rank, ctx_.size);
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      throw Error(ErrorCode::kUnavailable, fmt::format("gloo: {}", e.what()));
    }
  }

  // Every rank is connected and has read our rendezvous keys.
  void setup_complete() override {
    if (adapter_) adapter_->remove_own_keys();
    if (ctx_.gloo.inline_small_calls) {
      TPCOMM_LOG(kDebug, "gloo",
                 "rank {}: calls of at most {} bytes per peer travel in the opening exchange",
                 ctx_.rank, gloo_inline_room(ctx_.size));
    } else {
      TPCOMM_LOG(kDebug, "gloo", "rank {}: every call runs Gloo's own collective", ctx_.rank);
    }
  }

  // Runs on the worker thread; the caller waits for it or for abort().
  void run(const Call& call) override {
    if (!context_) throw Error(ErrorCode::kInternal, "gloo backend used before set-up");
    const GlooGroup group{context_, ctx_.rank, ctx_.size, ctx_.timeout};
    // The last call's buffers, unless an abandoned job still holds them.
    if (!staged_ || staged_.use_count() > 1) {
      staged_ = std::make_shared<StagedCall>(
          ctx_.gloo.inline_small_calls ? gloo_inline_room(ctx_.size) : 0);
    }
    std::shared_ptr<StagedCall> staged = staged_;
    staged->stage(call, ctx_.rank, ctx_.size);
    const CallIdentity identity = identity_of(call);
    gloo_translated([&] {
      worker_.run([group, staged, identity] { run_staged(group, *staged, identity); },
                  ctx_.timeout + std::chrono::seconds(5));
      return 0;
    });
    // What this rank's output holds (none off the root of a gather or reduce).
    const std::size_t es = size_of(call.type);
    const std::size_t out_bytes = output_elements(call, ctx_.rank, ctx_.size) * es;
    // A reduce_scatterv's block of the all-reduced whole.
    std::size_t from = 0;
    for (int r = 0; call.op == Op::kReduceScatter && per_rank_counts(call) && r < ctx_.rank; ++r) {
      from += call.recv_counts[r] * es;
    }
    if (out_bytes > 0) std::memcpy(call.output, staged->output.data() + from, out_bytes);
  }

  // Point-to-point on the calling thread: Gloo's transport moves the bytes, an abort's closed
  // connections end a wait.
  std::uint64_t start(const PeerMessage& m) override {
    return gloo_translated([&] { return peer_->start(m); });
  }
  int wait(std::uint64_t handle, const Deadline& deadline) override {
    return gloo_translated([&] { return peer_->wait(handle, deadline); });
  }

  // From any thread: the waiting call fails at once, and closing the connections makes every
  // peer's pending Gloo call fail too instead of completing with a rank that gave up.
  void abort() override {
    worker_.abandon("gloo: the communicator was aborted while this call was in Gloo");
    if (context_) context_->closeConnections();
  }

 private:
  BackendContext ctx_;
  std::shared_ptr<gloo::transport::Device> device_;
  std::shared_ptr<GlooStoreAdapter> adapter_;
  std::shared_ptr<gloo::Context> context_;
  GlooWorker worker_;
  std::shared_ptr<StagedCall> staged_;
  std::unique_ptr<GlooPeerMessages> peer_;
};

}  // namespace

std::unique_ptr<CollectiveBackend> make_gloo_backend(const BackendContext& context) {
  return std::make_unique<GlooBackend>(context);
}

}  // namespace tpcomm::transport
