// A stand-in backend for tests of the set-up protocol: correct, slow collectives over the
// bootstrap (every rank gathers every input and reduces in rank order in fp32). It registers as
// `shm` until the real shared-memory backend exists, so the planner routes calls to it.
#pragma once

#include <cstring>
#include <memory>

#include "runtime/communicator_impl.hpp"
#include "transport/common/convert.hpp"

namespace tpcomm::test {

class ReferenceBackend final : public transport::CollectiveBackend {
 public:
  explicit ReferenceBackend(std::shared_ptr<Bootstrap> bs) : bs_(std::move(bs)) {}
  Backend kind() const override { return Backend::kShm; }
  int setup_steps() const override { return 1; }
  std::string setup_step_name(int) const override { return "shm.setup"; }
  void run_setup_step(int, const Deadline&) override {}
  void abort() override {}

  void run(const transport::Call& c) override {
    const int w = bs_->size();
    const std::size_t es = size_of(c.type);
    const std::size_t in_count =
        c.op == Op::kReduceScatter ? c.count * static_cast<std::size_t>(w) : c.count;
    Bytes mine(static_cast<const std::uint8_t*>(c.input),
               static_cast<const std::uint8_t*>(c.input) + in_count * es);
    auto all = bs_->all_gather(mine, "reference call", Deadline::after(std::chrono::seconds(30)));
    if (c.op == Op::kAllGather) {
      for (int r = 0; r < w; ++r) {
        std::memcpy(
            static_cast<std::uint8_t*>(c.output) + static_cast<std::size_t>(r) * c.count * es,
            all[static_cast<std::size_t>(r)].data(), c.count * es);
      }
      return;
    }
    std::vector<float> acc(in_count), x(in_count);
    for (int r = 0; r < w; ++r) {
      transport::to_float(all[static_cast<std::size_t>(r)].data(), c.type, in_count,
                          r == 0 ? acc.data() : x.data());
      if (r == 0) continue;
      for (std::size_t i = 0; i < in_count; ++i) {
        acc[i] = c.reduce == ReduceOp::kMax   ? std::max(acc[i], x[i])
                 : c.reduce == ReduceOp::kMin ? std::min(acc[i], x[i])
                                              : acc[i] + x[i];
      }
    }
    if (c.reduce == ReduceOp::kAvg) {
      for (auto& v : acc) v /= static_cast<float>(w);
    }
    const std::size_t offset =
        c.op == Op::kReduceScatter ? static_cast<std::size_t>(bs_->rank()) * c.count : 0;
    transport::from_float(acc.data() + offset, c.type, c.count, c.output);
  }

 private:
  std::shared_ptr<Bootstrap> bs_;
};

inline std::map<Backend, BackendFactory> factories_with_reference_shm() {
  auto f = detail::builtin_backend_factories();
  f[Backend::kShm] = [](const BackendContext& ctx) {
    return std::make_unique<ReferenceBackend>(ctx.bootstrap);
  };
  return f;
}

}  // namespace tpcomm::test
