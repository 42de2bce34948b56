// Local backend: copies (and the avg of one rank is the value itself).
#include "local_backend.hpp"

#include <cstring>

#include <fmt/format.h>

#include "tpcomm/error.hpp"
#include "transport/common/call_sizes.hpp"

namespace tpcomm::transport {
namespace {

class LocalBackend final : public CollectiveBackend {
 public:
  Backend kind() const override { return Backend::kLocal; }
  int setup_steps() const override { return 0; }
  std::string setup_step_name(int) const override { return {}; }
  void run_setup_step(int, const Deadline&) override {}
  // One rank: every operation's output is its input (an all_to_allv's one block, whose two
  // counts must agree).
  void run(const Call& c) override {
    if (c.send_counts != nullptr && c.send_counts[0] != c.recv_counts[0]) {
      throw Error(ErrorCode::kMismatch,
                  fmt::format("all_to_allv counts do not match: rank 0 sends {} elements to rank "
                              "0, which expects {} from it",
                              c.send_counts[0], c.recv_counts[0]));
    }
    const std::size_t bytes = input_elements(c, 0, 1) * size_of(c.type);
    if (c.input != c.output && bytes > 0) std::memmove(c.output, c.input, bytes);
  }
  void abort() override {}
};

}  // namespace

std::unique_ptr<CollectiveBackend> make_local_backend() {
  return std::make_unique<LocalBackend>();
}

}  // namespace tpcomm::transport
