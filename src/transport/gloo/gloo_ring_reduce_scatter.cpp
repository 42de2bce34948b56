// Ring reduce-scatter on Gloo's unbound buffers (gloo_ring_reduce_scatter.hpp).
#include "gloo_ring_reduce_scatter.hpp"

#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include "tpcomm/error.hpp"

namespace tpcomm::transport {
namespace {

// Slots of this collective: a prefix of our own above Gloo's (0x01-0x08), the call's tag below.
constexpr std::uint8_t kRingReduceScatterSlotPrefix = 0x40;

}  // namespace

void gloo_ring_reduce_scatter(gloo::Context& context, float* data, std::size_t block,
                              GlooReduceFn reduce, std::uint32_t tag,
                              std::chrono::milliseconds timeout, std::vector<float>& received) {
  const int size = context.size;
  if (size == 1 || block == 0) return;
  const int me = context.rank;
  const int next = (me + 1) % size;
  const int previous = (me + size - 1) % size;
  const std::size_t bytes = block * sizeof(float);
  if (received.size() < block) received.resize(block);
  const std::uint64_t slot = gloo::Slot::build(kRingReduceScatterSlotPrefix, tag);
  auto outgoing = context.createUnboundBuffer(data, bytes * static_cast<std::size_t>(size));
  auto incoming = context.createUnboundBuffer(received.data(), bytes);
  auto block_at = [&](int step_back) {
    return static_cast<std::size_t>(((me - step_back) % size + size) % size);
  };
  // Step s sends block me-s-1 (this rank's own values at s = 0, afterwards the partial result it
  // folded in step s-1) and folds in block me-s-2, which the previous rank sent; the last step
  // (s = size-2) folds in block me, so that block ends with every rank's contribution.
  for (int s = 0; s + 1 < size; ++s) {
    const std::size_t send_block = block_at(s + 1);
    const std::size_t fold_block = block_at(s + 2);
    outgoing->send(next, slot, send_block * bytes, bytes);
    incoming->recv(previous, slot, 0, bytes);
    if (!incoming->waitRecv(timeout)) {
      throw Error(ErrorCode::kUnavailable, "gloo: a reduce-scatter receive was aborted");
    }
    float* mine = data + fold_block * block;
    reduce(mine, mine, received.data(), block);
    outgoing->waitSend(timeout);
  }
}

}  // namespace tpcomm::transport
