#include "graph_safe_scratch.hpp"

#include <bit>

#include <fmt/format.h>

#include "tpcomm/error.hpp"

namespace tpcomm::transport {

void* GraphSafeScratch::get(std::size_t bytes, bool capturing, std::string_view what) {
  if (bytes > bytes_) {
    if (capturing) {
      throw Error(ErrorCode::kInvalidInput,
                  fmt::format("{} is being captured into a CUDA graph and needs a device staging "
                              "buffer of {} bytes, but this communicator's is {} bytes: growing "
                              "it would allocate during the capture, which invalidates it. Run "
                              "one such call of at least this size outside a capture first",
                              what, bytes, bytes_));
    }
    // Allocated first: a failure leaves the buffer as it was (retiring first left no buffer
    // with the old size still claimed, and the next smaller call got a null address).
    // Powers of two: the buffers kept for graphs add up to less than the one in use, however
    // many growths follow captures.
    const std::size_t size = std::bit_ceil(bytes);
    std::shared_ptr<void> grown = allocate_(size);
    // A graph captured with the old buffer replays into it: kept until the communicator goes.
    if (captured_) {
      retired_.push_back(std::move(current_));
      retired_bytes_ += bytes_;
    }
    current_ = std::move(grown);
    bytes_ = size;
    captured_ = false;
  }
  if (capturing) captured_ = true;
  return current_.get();
}

}  // namespace tpcomm::transport
