// Ring reduce-scatter on Gloo's unbound buffers (gloo_ring_reduce_scatter.hpp).
#include "gloo_ring_reduce_scatter.hpp"

#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include "kernels/cpu/convert.hpp"
#include "tpcomm/error.hpp"

namespace tpcomm::transport {
namespace {

// Slots of this collective: a prefix of our own above Gloo's (0x01-0x08), the call's tag below.
constexpr std::uint8_t kRingReduceScatterSlotPrefix = 0x40;

}  // namespace

void gloo_ring_reduce_scatter(gloo::Context& context, float* data, const void* raw, DataType type,
                              std::size_t block, GlooReduceFn reduce, std::uint32_t tag,
                              std::chrono::milliseconds timeout, GlooRingScratch& scratch) {
  const int size = context.size;
  if (size == 1 || block == 0) return;
  const int me = context.rank;
  const int next = (me + 1) % size;
  const int previous = (me + size - 1) % size;
  const auto blocks = static_cast<std::size_t>(size);
  const std::size_t bytes = block * sizeof(float);
  const std::size_t raw_bytes = block * size_of(type);
  if (scratch.received.size() < block) scratch.received.resize(block);
  if (type != DataType::kFloat32 && scratch.received_raw.size() < raw_bytes) {
    scratch.received_raw.resize(raw_bytes);
  }
  const std::uint64_t slot = gloo::Slot::build(kRingReduceScatterSlotPrefix, tag);
  auto outgoing = context.createUnboundBuffer(data, bytes * blocks);
  auto incoming = context.createUnboundBuffer(scratch.received.data(), bytes);
  std::unique_ptr<gloo::transport::UnboundBuffer> raw_outgoing, raw_incoming;
  if (type != DataType::kFloat32) {
    raw_outgoing = context.createUnboundBuffer(const_cast<void*>(raw), raw_bytes * blocks);
    raw_incoming = context.createUnboundBuffer(scratch.received_raw.data(), raw_bytes);
  }
  auto block_at = [&](int step_back) {
    return static_cast<std::size_t>(((me - step_back) % size + size) % size);
  };
  // Step s sends block me-s-1 (this rank's own values at s = 0, afterwards the partial result it
  // folded in step s-1) and folds in block me-s-2, which the previous rank sent; the last step
  // (s = size-2) folds in block me, so that block ends with every rank's contribution.
  for (int s = 0; s + 1 < size; ++s) {
    const std::size_t send_block = block_at(s + 1);
    const std::size_t fold_block = block_at(s + 2);
    const bool as_is = s == 0 && type != DataType::kFloat32;
    auto& out = as_is ? raw_outgoing : outgoing;
    auto& in = as_is ? raw_incoming : incoming;
    const std::size_t step_bytes = as_is ? raw_bytes : bytes;
    out->send(next, slot, send_block * step_bytes, step_bytes);
    in->recv(previous, slot, 0, step_bytes);
    if (!in->waitRecv(timeout)) {
      throw Error(ErrorCode::kUnavailable, "gloo: a reduce-scatter receive was aborted");
    }
    if (as_is) to_float(scratch.received_raw.data(), type, block, scratch.received.data());
    float* mine = data + fold_block * block;
    reduce(mine, mine, scratch.received.data(), block);
    out->waitSend(timeout);
  }
}

}  // namespace tpcomm::transport
