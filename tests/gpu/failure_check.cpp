#include "failure_check.hpp"

#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <thread>

#include "cuda_check.hpp"
#include "tpcomm/deadline.hpp"

namespace tpcomm::gpu_check {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// What one rank's watchdog reported, and when.
struct Reports {
  std::mutex m;
  std::string text[2];
  Clock::time_point at[2];
  std::function<void(const std::string&)> sink(int rank) {
    return [this, rank](const std::string& why) {
      std::lock_guard<std::mutex> lock(m);
      if (text[rank].empty()) {
        text[rank] = why;
        at[rank] = Clock::now();
      }
    };
  }
  bool wait_for(int rank, std::chrono::milliseconds limit) {
    const auto until = Clock::now() + limit;
    while (Clock::now() < until) {
      {
        std::lock_guard<std::mutex> lock(m);
        if (!text[rank].empty()) return true;
      }
      std::this_thread::sleep_for(1ms);
    }
    return false;
  }
};

// One eager one-shot all-reduce of 1024 floats on `stream` (its buffers are the caller's).
transport::Call one_shot(void* in, void* out, cudaStream_t stream, bool captured) {
  transport::Call c;
  c.input = in;
  c.output = out;
  c.count = 1024;
  c.algorithm = Algorithm::kOneShot;
  c.stream = stream;
  c.captured = captured;
  return c;
}

struct Buffers {
  void* in = nullptr;
  void* out = nullptr;
  cudaStream_t stream = nullptr;
  Buffers() {
    check_cuda(cudaMalloc(&in, 4096), "cudaMalloc");
    check_cuda(cudaMalloc(&out, 4096), "cudaMalloc");
    check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  }
};

bool has(const std::string& text, const char* what) {
  return text.find(what) != std::string::npos;
}

// Part 1: a timeout poisons the group; the other rank's next launch fails at entry.
bool timeout_reaches_the_next_launch(const FailureSetUp& set_up, const OnThreads& on_threads) {
  Reports reports;
  double late_ms = -1;
  on_threads(2, [&](int rank, std::shared_ptr<Bootstrap> bs) {
    auto backend = set_up(bs, 0xfa11ed01, reports.sink(rank), 1000ms);
    Buffers b;
    if (rank == 0) {
      backend->run(one_shot(b.in, b.out, b.stream, false));
      reports.wait_for(0, 5000ms);
      check_cuda(cudaStreamSynchronize(b.stream), "rank 0's stream");
    }
    bs->barrier("rank 0 timed out", Deadline::after(10s));
    if (rank == 1) {
      const auto start = Clock::now();
      backend->run(one_shot(b.in, b.out, b.stream, false));
      check_cuda(cudaStreamSynchronize(b.stream), "rank 1's stream");
      if (reports.wait_for(1, 2000ms)) {
        late_ms = std::chrono::duration<double, std::milli>(reports.at[1] - start).count();
      }
    }
    bs->barrier("part 1 done", Deadline::after(10s));
  });
  std::printf("failure 1: rank 0: %s\nfailure 1: rank 1 after %.1f ms: %s\n",
              reports.text[0].c_str(), late_ms, reports.text[1].c_str());
  return has(reports.text[0], "rank 1 did not signal") &&
         has(reports.text[1], "the group failed earlier (rank 0") && late_ms >= 0 && late_ms < 500;
}

// Part 2: rank 1's host abort stops rank 0's waiting kernel within milliseconds.
bool abort_reaches_the_peers_kernel(const FailureSetUp& set_up, const OnThreads& on_threads) {
  Reports reports;
  Clock::time_point aborted_at;
  std::atomic<bool> launched{false};
  on_threads(2, [&](int rank, std::shared_ptr<Bootstrap> bs) {
    auto backend = set_up(bs, 0xfa11ed02, reports.sink(rank), 20000ms);
    Buffers b;
    if (rank == 0) {
      backend->run(one_shot(b.in, b.out, b.stream, false));
      launched = true;
      reports.wait_for(0, 5000ms);
      check_cuda(cudaStreamSynchronize(b.stream), "rank 0's stream");
    } else {
      while (!launched) std::this_thread::sleep_for(1ms);
      std::this_thread::sleep_for(200ms);  // rank 0's kernel is waiting for this rank by now
      aborted_at = Clock::now();
      backend->abort();
    }
    bs->barrier("part 2 done", Deadline::after(30s));
  });
  const double ms = std::chrono::duration<double, std::milli>(reports.at[0] - aborted_at).count();
  std::printf("failure 2: rank 0, %.1f ms after rank 1 aborted: %s\n", ms, reports.text[0].c_str());
  return has(reports.text[0], "the group failed earlier (rank 1") && ms < 200;
}

// Part 3: a captured call replayed after the group failed reports an error on its stream.
bool a_failed_replay_is_not_silent(const FailureSetUp& set_up, const OnThreads& on_threads) {
  Reports reports;
  cudaError_t replay[2] = {cudaSuccess, cudaSuccess};
  on_threads(2, [&](int rank, std::shared_ptr<Bootstrap> bs) {
    auto backend = set_up(bs, 0xfa11ed03, reports.sink(rank), 20000ms);
    Buffers b;
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    check_cuda(cudaStreamBeginCapture(b.stream, cudaStreamCaptureModeThreadLocal), "capture");
    backend->run(one_shot(b.in, b.out, b.stream, true));
    check_cuda(cudaStreamEndCapture(b.stream, &graph), "end capture");
    check_cuda(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
    bs->barrier("captured", Deadline::after(10s));
    if (rank == 1) backend->abort();  // the group fails
    bs->barrier("aborted", Deadline::after(10s));
    cudaGraphLaunch(exec, b.stream);
    replay[rank] = cudaStreamSynchronize(b.stream);
    bs->barrier("replayed", Deadline::after(30s));
  });
  std::printf("failure 3: replays after the abort: rank 0 %s, rank 1 %s\n",
              cudaGetErrorName(replay[0]), cudaGetErrorName(replay[1]));
  return replay[0] != cudaSuccess && replay[1] != cudaSuccess;
}

}  // namespace

int failure_check(const FailureSetUp& set_up, const OnThreads& on_threads) {
  const bool one = timeout_reaches_the_next_launch(set_up, on_threads);
  const bool two = abort_reaches_the_peers_kernel(set_up, on_threads);
  const bool three = a_failed_replay_is_not_silent(set_up, on_threads);
  std::printf(
      "failure: timeout reaches the next launch %s, abort reaches the peer's kernel %s, "
      "a failed replay is not silent %s\n",
      one ? "ok" : "FAILED", two ? "ok" : "FAILED", three ? "ok" : "FAILED");
  std::fflush(stdout);
  return one && two && three ? 0 : 1;
}

}  // namespace tpcomm::gpu_check
