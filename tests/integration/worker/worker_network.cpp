// The worker's network and signal knobs (worker_network.hpp).
#include "worker_network.hpp"

#include <signal.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace tpcomm::test {
namespace {

void ignore_signal(int) {}

}  // namespace

long long wall_clock_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void worker_prelude(int rank, bool announce) {
  if (const char* every = std::getenv("TEST_SIGNAL_EVERY_US")) {
    struct sigaction a {};
    a.sa_handler = ignore_signal;  // no SA_RESTART: blocking calls return EINTR
    sigemptyset(&a.sa_mask);
    sigaction(SIGALRM, &a, nullptr);
    const long us = std::atol(every);
    itimerval t{};
    t.it_interval.tv_usec = us;
    t.it_value.tv_usec = us;
    setitimer(ITIMER_REAL, &t, nullptr);
  }
  if (!announce) return;
  std::printf("rank %d: starting at %lld\n", rank, wall_clock_ms());
  std::fflush(stdout);
}

CommunicatorOptions options_from_env() {
  CommunicatorOptions o;
  if (const char* ms = std::getenv("TEST_OPTION_TIMEOUT_MS")) {
    o.timeout = std::chrono::milliseconds(std::atol(ms));
  }
  return o;
}

int run_after_file(Communicator& comm, const std::string& path) {
  const int rank = comm.rank();
  const int w = comm.size();
  auto call_and_check = [&](int round) {
    std::vector<float> v(1000);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((rank + 1) * round + i);
    comm.all_reduce(v.data(), v.data(), v.size(), DataType::kFloat32, ReduceOp::kSum);
    int wrong = 0;
    for (std::size_t i = 0; i < v.size(); ++i) {
      wrong += v[i] != static_cast<float>(w * (w + 1) / 2 * round + w * static_cast<int>(i));
    }
    return wrong;
  };
  const int wrong = call_and_check(1);
  std::printf("rank %d: created at %lld, %d wrong\n", rank, wall_clock_ms(), wrong);
  std::fflush(stdout);
  for (int i = 0; i < 6000 && access(path.c_str(), F_OK) != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::printf("rank %d: calling at %lld\n", rank, wall_clock_ms());
  std::fflush(stdout);
  int wrong_after = 0;
  try {
    wrong_after = call_and_check(2);
  } catch (const Error& e) {
    // Printed here, when the call fails: the communicator's and the bootstrap's destructors
    // (rank 0 lingers while peers keep their store connections) come after it.
    std::printf("rank %d: ERROR (%s) at %lld: %s\n", rank, to_string(e.code()), wall_clock_ms(),
                e.what());
    return 1;
  }
  std::printf("rank %d: the call after %s returned, %d wrong\n", rank, path.c_str(), wrong_after);
  return wrong == 0 && wrong_after == 0 ? 0 : 1;
}

namespace {

// Call k of until_lost, checked: rank r's element i is (r + 1) * (k % 7 + 1) + i % 1000 (exact in
// float32); returns the elements that are wrong.
int checked_call(Communicator& comm, int k) {
  const int rank = comm.rank();
  const int w = comm.size();
  const std::size_t n = k % 3 == 1 ? 65536 : 256;
  auto value = [&](int r, std::size_t i) {
    return static_cast<float>((r + 1) * (k % 7 + 1) + static_cast<int>(i % 1000));
  };
  std::vector<float> in(n);
  for (std::size_t i = 0; i < n; ++i) in[i] = value(rank, i);
  int wrong = 0;
  if (k % 3 == 2) {
    std::vector<float> out(n * static_cast<std::size_t>(w), -1.0f);
    comm.all_gather(in.data(), out.data(), n, DataType::kFloat32);
    for (int r = 0; r < w; ++r) {
      for (std::size_t i = 0; i < n; ++i)
        wrong += out[static_cast<std::size_t>(r) * n + i] != value(r, i);
    }
    return wrong;
  }
  comm.all_reduce(in.data(), in.data(), n, DataType::kFloat32, ReduceOp::kSum);
  for (std::size_t i = 0; i < n; ++i) {
    wrong +=
        in[i] != static_cast<float>((k % 7 + 1) * w * (w + 1) / 2 + w * static_cast<int>(i % 1000));
  }
  return wrong;
}

}  // namespace

int run_until_lost(Communicator& comm, int calls) {
  const int rank = comm.rank();
  std::printf("rank %d: calling from %lld\n", rank, wall_clock_ms());
  std::fflush(stdout);
  int wrong = 0;
  int k = 0;
  try {
    for (; k < calls; ++k) wrong += checked_call(comm, k);
  } catch (const Error& e) {
    std::printf("rank %d: ERROR (%s) at %lld in call #%d, %d wrong before it: %s\n", rank,
                to_string(e.code()), wall_clock_ms(), k, wrong, e.what());
    return 1;
  }
  std::printf("rank %d: %d calls, %d wrong, no error\n", rank, k, wrong);
  return wrong == 0 ? 0 : 1;
}

}  // namespace tpcomm::test
