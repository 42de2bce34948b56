// The voted set-up of the GPU backends, on a machine without a GPU: the probe reports one
// NVLink-connected H100 per rank, and the real custom and nccl backend objects are wrapped so
// that their set-up steps (the real names, in the real order) succeed without a GPU unless
// TPCOMM_FAULT makes one fail on one rank. What is tested is the communicator's handling of those
// steps: the AND vote after each, the backend disabled on every rank with the reason in the plan,
// the plan recomputed to NCCL, and the fallback failing as an error on every rank.
#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/communicator_state.hpp"
#include "thread_ranks.hpp"
#include "tpcomm/communicator.hpp"
#include "tpcomm/error.hpp"
#include "tpcomm/probe.hpp"

#ifdef TPCOMM_HAVE_CUDA
#include "transport/custom/custom_backend.hpp"
#include "transport/nccl/nccl_backend.hpp"
#endif

namespace tpcomm {
namespace {

using test::on_ranks;
using test::ScopedEnv;

#ifdef TPCOMM_HAVE_CUDA

// The steps each rank ran, per backend.
struct StepLog {
  std::mutex mutex;
  std::map<std::pair<int, Backend>, std::vector<std::string>> steps;
  std::vector<std::string> of(int rank, Backend b) {
    std::lock_guard<std::mutex> lock(mutex);
    return steps[{rank, b}];
  }
};

// A real GPU backend whose set-up steps only record that they ran.
class RecordedSetUp final : public transport::CollectiveBackend {
 public:
  RecordedSetUp(std::unique_ptr<transport::CollectiveBackend> real, int rank, StepLog& log)
      : real_(std::move(real)), rank_(rank), log_(log) {}
  Backend kind() const override { return real_->kind(); }
  int setup_steps() const override { return real_->setup_steps(); }
  std::string setup_step_name(int step) const override { return real_->setup_step_name(step); }
  void run_setup_step(int step, const Deadline&) override {
    std::lock_guard<std::mutex> lock(log_.mutex);
    log_.steps[{rank_, kind()}].push_back(setup_step_name(step));
  }
  void run(const transport::Call&) override {
    throw Error(ErrorCode::kInternal, "not callable in this test");
  }
  void abort() override {}

 private:
  std::unique_ptr<transport::CollectiveBackend> real_;
  int rank_;
  StepLog& log_;
};

runtime::Platform fake_gpu_platform(int ranks, StepLog& log, bool multicast = false) {
  runtime::Platform p = runtime::builtin_platform();
  p.probe = [ranks, multicast] {
    LocalFacts local = probe_local();
    for (int i = 0; i < ranks; ++i) {
      DeviceFacts d;
      d.type = DeviceType::kCuda;
      d.index = i;
      d.sm = 90;
      d.nvlink_island = 0;
      d.p2p = true;
      d.vmm = true;
      d.multicast = multicast;
      local.gpus.push_back(d);
    }
    return local;
  };
  p.gpu_unavailable_reason = [] { return std::string(); };
  for (Backend b : {Backend::kCustom, Backend::kMultimem, Backend::kNccl}) {
    runtime::BackendFactory real = p.factories.at(b);
    p.factories[b] = [&log, real](const transport::BackendContext& ctx) {
      return std::make_unique<RecordedSetUp>(real(ctx), ctx.rank, log);
    };
  }
  return p;
}

CommunicatorOptions cuda_options() {
  CommunicatorOptions o;
  o.device = DeviceType::kCuda;
  o.timeout = std::chrono::milliseconds(20000);
  return o;
}

TEST(GpuSetUpVotes, EveryStepRunsAndBothBackendsAreSetUpWithoutFaults) {
  StepLog log;
  const auto platform = fake_gpu_platform(2, log);
  on_ranks(make_thread_group(2), [&](int r, std::shared_ptr<Bootstrap> bs) {
    auto comm = runtime::create_communicator(bs, cuda_options(), platform);
    const auto& ar = comm->plan().ops.at(Op::kAllReduce);
    EXPECT_EQ(ar.table.front().backend, Backend::kCustom);
    EXPECT_EQ(ar.table.back().backend, Backend::kNccl);
    EXPECT_EQ(
        log.of(r, Backend::kCustom),
        (std::vector<std::string>{"custom.workspace", "custom.exchange", "custom.peer_probe"}));
    EXPECT_EQ(log.of(r, Backend::kNccl), (std::vector<std::string>{"nccl.load", "nccl.init"}));
    // Both tables were planned and agreed on: captured calls use the graph one, whose custom
    // range is larger (registered buffers skip the copy) and which allows zero-copy here.
    const auto& graph = comm->plan(Mode::kGraph).ops.at(Op::kAllReduce);
    EXPECT_EQ(graph.table.front().backend, Backend::kCustom);
    EXPECT_GT(graph.table.front().max_bytes.value_or(0), ar.table.front().max_bytes.value_or(0));
    EXPECT_TRUE(graph.zero_copy) << graph.zero_copy_reason;
    EXPECT_EQ(comm->plan(Mode::kEager).digest, comm->plan().digest);
    EXPECT_NE(comm->plan(Mode::kGraph).digest, comm->plan().digest);
  });
}

// Each rank's communicator names the GPU its calls take (what the Python package checks every
// CUDA tensor against): the option where given, else LOCAL_RANK modulo the visible GPUs.
TEST(GpuSetUpVotes, EachRankNamesTheGpuItsCallsRunOn) {
  StepLog log;
  const auto platform = fake_gpu_platform(3, log);
  on_ranks(make_thread_group(2), [&](int r, std::shared_ptr<Bootstrap> bs) {
    CommunicatorOptions o = cuda_options();
    o.cuda_device = 2 - r;
    EXPECT_EQ(runtime::create_communicator(bs, o, platform)->cuda_device(), 2 - r);
  });
  ScopedEnv local_rank("LOCAL_RANK", "4");  // 4 modulo 3 GPUs
  on_ranks(make_thread_group(1), [&](int, std::shared_ptr<Bootstrap> bs) {
    EXPECT_EQ(runtime::create_communicator(bs, cuda_options(), platform)->cuda_device(), 1);
  });
}

TEST(GpuSetUpVotes, AFailedCustomStepOnOneRankDisablesCustomEverywhereAndNcclCarriesTheCalls) {
  ScopedEnv fault("TPCOMM_FAULT", "custom.exchange:fail@1");
  StepLog log;
  const auto platform = fake_gpu_platform(3, log);
  on_ranks(make_thread_group(3), [&](int r, std::shared_ptr<Bootstrap> bs) {
    auto comm = runtime::create_communicator(bs, cuda_options(), platform);
    for (const auto& [op, p] : comm->plan().ops) {
      EXPECT_FALSE(p.is_eligible(Backend::kCustom));
      const std::string& why = p.rejected.at(Backend::kCustom);
      EXPECT_NE(why.find("step custom.exchange failed on rank 1: injected fault"),
                std::string::npos)
          << why;
      for (const auto& row : p.table) EXPECT_EQ(row.backend, Backend::kNccl);
    }
    // Every rank stopped after the failed vote: no rank went on to the peer probe.
    EXPECT_EQ(log.of(r, Backend::kCustom),
              (std::vector<std::string>{"custom.workspace", "custom.exchange"}));
    EXPECT_EQ(log.of(r, Backend::kNccl), (std::vector<std::string>{"nccl.load", "nccl.init"}));
  });
}

// Four H100s on an NVSwitch with multicast: multimem is set up in its four steps; a failure in
// one rank's bind disables it everywhere, and custom two-shot (the second choice) takes its sizes.
TEST(GpuSetUpVotes, MultimemStepsAreVotedAndAFailedBindFallsBackToCustom) {
  {
    StepLog log;
    const auto platform = fake_gpu_platform(4, log, true);
    on_ranks(make_thread_group(4), [&](int r, std::shared_ptr<Bootstrap> bs) {
      auto comm = runtime::create_communicator(bs, cuda_options(), platform);
      const auto& ar = comm->plan().ops.at(Op::kAllReduce);
      EXPECT_TRUE(ar.is_eligible(Backend::kMultimem));
      bool uses_multimem = false;
      for (const auto& row : ar.table) uses_multimem |= row.backend == Backend::kMultimem;
      EXPECT_TRUE(uses_multimem);
      EXPECT_EQ(log.of(r, Backend::kMultimem),
                (std::vector<std::string>{"multimem.workspace", "multimem.share", "multimem.bind",
                                          "multimem.probe"}));
    });
  }
  ScopedEnv fault("TPCOMM_FAULT", "multimem.bind:fail@2");
  StepLog log;
  const auto platform = fake_gpu_platform(4, log, true);
  on_ranks(make_thread_group(4), [&](int r, std::shared_ptr<Bootstrap> bs) {
    auto comm = runtime::create_communicator(bs, cuda_options(), platform);
    const auto& ar = comm->plan().ops.at(Op::kAllReduce);
    EXPECT_NE(ar.rejected.at(Backend::kMultimem)
                  .find("step multimem.bind failed on rank 2: injected fault"),
              std::string::npos);
    bool two_shot = false;
    for (const auto& row : ar.table) {
      EXPECT_NE(row.backend, Backend::kMultimem);
      two_shot |= row.backend == Backend::kCustom && row.algorithm == Algorithm::kTwoShot;
    }
    EXPECT_TRUE(two_shot);
    EXPECT_EQ(log.of(r, Backend::kMultimem),
              (std::vector<std::string>{"multimem.workspace", "multimem.share", "multimem.bind"}));
  });
}

TEST(GpuSetUpVotes, TheNcclFallbackFailingOnOneRankIsAnErrorOnEveryRank) {
  ScopedEnv fault("TPCOMM_FAULT", "nccl.init:fail@0");
  StepLog log;
  const auto platform = fake_gpu_platform(2, log);
  const auto errors =
      test::errors_on_ranks(make_thread_group(2), [&](int, std::shared_ptr<Bootstrap> bs) {
        runtime::create_communicator(bs, cuda_options(), platform);
      });
  for (const auto& e : errors) {
    EXPECT_NE(e.find("the fallback engine nccl could not be set up: step nccl.init failed on "
                     "rank 0: injected fault"),
              std::string::npos)
        << e;
  }
}

#else

TEST(GpuSetUpVotes, NeedsACudaBuild) {
  GTEST_SKIP() << "this build has no CUDA backends (TPCOMM_CUDA off or nvcc not found), so the "
                  "GPU set-up votes cannot be tested";
}

#endif

}  // namespace
}  // namespace tpcomm
