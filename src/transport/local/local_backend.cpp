// Local backend: copies (and the avg of one rank is the value itself).
#include "local_backend.hpp"

#include <cstring>

#include "tpcomm/error.hpp"

namespace tpcomm::transport {
namespace {

class LocalBackend final : public CollectiveBackend {
 public:
  Backend kind() const override { return Backend::kLocal; }
  int setup_steps() const override { return 0; }
  std::string setup_step_name(int) const override { return {}; }
  void run_setup_step(int, const Deadline&) override {}
  void run(const Call& c) override {
    if (c.input != c.output && c.count > 0) {
      std::memmove(c.output, c.input, c.count * size_of(c.type));
    }
  }
  void abort() override {}
};

}  // namespace

std::unique_ptr<CollectiveBackend> make_local_backend() {
  return std::make_unique<LocalBackend>();
}

}  // namespace tpcomm::transport
