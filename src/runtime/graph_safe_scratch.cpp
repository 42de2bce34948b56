#include "graph_safe_scratch.hpp"

#include <fmt/format.h>

#include "tpcomm/error.hpp"

namespace tpcomm::runtime {

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
    // A graph captured with the old buffer replays into it: kept until the communicator goes.
    if (captured_) retired_.push_back(std::move(current_));
    current_ = allocate_(bytes);
    bytes_ = bytes;
    captured_ = false;
  }
  if (capturing) captured_ = true;
  return current_.get();
}

}  // namespace tpcomm::runtime
