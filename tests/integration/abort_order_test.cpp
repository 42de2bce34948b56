// The order of an abort (docs/gpu-kernels.md, "The signalling protocol, checked";
// docs/gpu-graphs.md, "Teardown and exit races"): the backends tell the peers before the
// communicator refuses a call, and a watchdog thread's abort that races the communicator's
// destruction finds no backend being destroyed. Every backend of a real CPU group is wrapped so
// that its abort() records what the communicator said at that time.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "runtime/communicator_state.hpp"
#include "thread_ranks.hpp"
#include "tpcomm/communicator.hpp"
#include "tpcomm/error.hpp"

namespace tpcomm {
namespace {

using test::on_ranks;

// What the wrapped backends saw, shared by the test and the wrappers.
struct AbortLog {
  std::atomic<Communicator*> comm{nullptr};
  std::atomic<int> aborts{0};
  std::atomic<int> aborted_already{0};  // aborts that found the communicator refusing calls
  std::atomic<int> aborts_while_destroyed{0};
  // Set by the test: the wrapper's destructor lets a thread call on_async_failure meanwhile.
  bool race_destruction = false;
};

class RecordingBackend final : public transport::CollectiveBackend {
 public:
  RecordingBackend(std::unique_ptr<transport::CollectiveBackend> real,
                   const transport::BackendContext& ctx, AbortLog& log)
      : real_(std::move(real)), on_async_failure_(ctx.on_async_failure), log_(log) {}

  // Like a GPU backend's watchdog thread: it reports a failure while the owner is destroyed,
  // and the destructor joins it.
  ~RecordingBackend() override {
    destroying_ = true;
    if (!log_.race_destruction) return;
    std::thread watchdog([this] { on_async_failure_("the watchdog saw a failure"); });
    watchdog.join();
  }

  Backend kind() const override { return real_->kind(); }
  int setup_steps() const override { return real_->setup_steps(); }
  std::string setup_step_name(int step) const override { return real_->setup_step_name(step); }
  void run_setup_step(int step, const Deadline& d) override { real_->run_setup_step(step, d); }
  void setup_complete() override { real_->setup_complete(); }
  void run(const transport::Call& call) override { real_->run(call); }
  void abort() override {
    ++log_.aborts;
    if (destroying_) ++log_.aborts_while_destroyed;
    if (Communicator* c = log_.comm.load(); c != nullptr && c->aborted()) ++log_.aborted_already;
    real_->abort();
  }

 private:
  std::unique_ptr<transport::CollectiveBackend> real_;
  std::function<void(const std::string&)> on_async_failure_;
  AbortLog& log_;
  std::atomic<bool> destroying_{false};
};

runtime::Platform recording_platform(AbortLog& log) {
  runtime::Platform p = runtime::builtin_platform();
  for (auto& [kind, factory] : p.factories) {
    runtime::BackendFactory real = factory;
    factory = [&log, real](const transport::BackendContext& ctx) {
      return std::make_unique<RecordingBackend>(real(ctx), ctx, log);
    };
  }
  return p;
}

TEST(AbortOrder, TheBackendsTellThePeersBeforeTheCommunicatorRefusesCalls) {
  AbortLog log;
  const auto platform = recording_platform(log);
  on_ranks(make_thread_group(1), [&](int, std::shared_ptr<Bootstrap> bs) {
    auto comm = runtime::create_communicator(bs, CommunicatorOptions{}, platform);
    log.comm = comm.get();
    EXPECT_FALSE(comm->aborted());
    comm->abort("the test aborts");
    EXPECT_TRUE(comm->aborted());
    EXPECT_GE(log.aborts.load(), 1);
    EXPECT_EQ(log.aborted_already.load(), 0)
        << "a backend's abort() ran after the communicator had started refusing calls";
    std::vector<float> x(4, 1.0f);
    try {
      comm->all_reduce(x.data(), x.data(), x.size(), DataType::kFloat32, ReduceOp::kSum);
      ADD_FAILURE() << "a call after abort() was not refused";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kAborted) << e.what();
    }
    log.comm = nullptr;
  });
}

TEST(AbortOrder, AWatchdogsAbortDuringDestructionFindsNoBackendBeingDestroyed) {
  AbortLog log;
  log.race_destruction = true;
  const auto platform = recording_platform(log);
  on_ranks(make_thread_group(1), [&](int, std::shared_ptr<Bootstrap> bs) {
    auto comm = runtime::create_communicator(bs, CommunicatorOptions{}, platform);
    comm.reset();
  });
  EXPECT_EQ(log.aborts_while_destroyed.load(), 0)
      << "abort_with called abort() on a backend that the destructor was destroying";
}

}  // namespace
}  // namespace tpcomm
