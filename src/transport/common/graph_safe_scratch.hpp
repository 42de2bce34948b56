// A staging buffer that CUDA graphs may point at (broadcast on a stream; docs/gpu-graphs.md,
// "Broadcast's device buffer under graphs"; NCCL's composed calls' scratch). A captured call keeps
// the buffer's address for every replay, so a buffer a capture used is never freed before its owner
// (the communicator): growing it after such a capture keeps the old one. And a capture may not
// allocate (cudaMalloc inside a global-mode capture invalidates it), so a call being captured that
// needs more than the buffer has is refused, with what to do. The buffer grows in powers of two, so
// what is kept for graphs stays below the size of the one in use.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

namespace tpcomm::transport {

class GraphSafeScratch {
 public:
  using Allocate = std::function<std::shared_ptr<void>(std::size_t bytes)>;
  explicit GraphSafeScratch(Allocate allocate) : allocate_(std::move(allocate)) {}

  // At least `bytes`, for a call that is being captured (`capturing`) or not. Throws
  // kInvalidInput when a capture would need the buffer to grow; `what` names the call.
  void* get(std::size_t bytes, bool capturing, std::string_view what);

  std::size_t bytes() const { return bytes_; }
  // Buffers kept only because a graph may still point at them, and their bytes.
  std::size_t retired() const { return retired_.size(); }
  std::size_t retired_bytes() const { return retired_bytes_; }

 private:
  Allocate allocate_;
  std::shared_ptr<void> current_;
  std::size_t bytes_ = 0;
  bool captured_ = false;  // a capture used current_
  std::vector<std::shared_ptr<void>> retired_;
  std::size_t retired_bytes_ = 0;
};

}  // namespace tpcomm::transport
