// Several threads of a rank calling one communicator at once (docs/communicator.md, "Threads"):
// the calls are served one at a time, in arrival order, so no interleaving reaches a backend's
// lanes, scratch buffers or Gloo's one-call-at-a-time worker. Every call of every thread has the
// same signature and rank-dependent data, so whichever thread's call a rank serves first the
// group's calls match, and every element of every result is checked. Also: a fork() child with an
// inherited communicator is refused and tears nothing down.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "runtime/call_queue.hpp"
#include "simulated_nodes.hpp"
#include "thread_ranks.hpp"
#include "tpcomm/communicator.hpp"
#include "tpcomm/error.hpp"

namespace tpcomm {
namespace {

using namespace std::chrono_literals;

constexpr int kThreadsPerRank = 3;
constexpr int kCallsPerThread = 60;

float value(int rank, std::size_t i) {
  return static_cast<float>((rank + 1) * 100000 + static_cast<int>(i % 4099));
}

// The first wrong element of `got` against `expect(i)`, or "".
template <typename Expect>
std::string first_wrong(const char* what, int call, const std::vector<float>& got, Expect expect) {
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (got[i] != expect(i)) {
      return std::string(what) + " #" + std::to_string(call) + " element " + std::to_string(i) +
             ": " + std::to_string(got[i]) + " instead of " + std::to_string(expect(i));
    }
  }
  return "";
}

// One thread's calls of one op, `count` elements per rank, each result checked element by
// element. Returns the first wrong element, or "".
std::string calls_of_one_thread(Communicator& comm, Op op, std::size_t count) {
  const int w = comm.size();
  const int r = comm.rank();
  const std::size_t in_count =
      op == Op::kReduceScatter ? count * static_cast<std::size_t>(w) : count;
  const std::size_t out_count = op == Op::kAllGather ? count * static_cast<std::size_t>(w) : count;
  std::vector<float> in(in_count);
  for (std::size_t i = 0; i < in_count; ++i) in[i] = value(r, i);
  std::vector<float> out(out_count);
  for (int call = 0; call < kCallsPerThread; ++call) {
    std::string wrong;
    if (op == Op::kAllGather) {
      comm.all_gather(in.data(), out.data(), count, DataType::kFloat32);
      wrong = first_wrong("all_gather", call, out, [&](std::size_t i) {
        return value(static_cast<int>(i / count), i % count);
      });
    } else {
      // A rank's block of the reduce-scatter input starts at r * count.
      const std::size_t offset = op == Op::kReduceScatter ? static_cast<std::size_t>(r) * count : 0;
      if (op == Op::kAllReduce) {
        comm.all_reduce(in.data(), out.data(), count, DataType::kFloat32, ReduceOp::kSum);
      } else {
        comm.reduce_scatter(in.data(), out.data(), count, DataType::kFloat32, ReduceOp::kSum);
      }
      wrong = first_wrong(op == Op::kAllReduce ? "all_reduce" : "reduce_scatter", call, out,
                          [&](std::size_t i) {
                            float sum = 0;
                            for (int q = 0; q < w; ++q) sum += value(q, offset + i);
                            return sum;
                          });
    }
    if (!wrong.empty()) return wrong;
  }
  return "";
}

// Every rank runs kThreadsPerRank threads of calls on its one communicator, one op after the
// other (all the calls of a phase have one signature, so any pairing of them across ranks is a
// valid one).
void threads_share_each_rank(int ranks, const runtime::Platform& platform,
                             const CommunicatorOptions& options, std::size_t count) {
  test::on_ranks(make_thread_group(ranks), [&](int r, std::shared_ptr<Bootstrap> bs) {
    auto comm = runtime::create_communicator(bs, options, platform);
    for (Op op : {Op::kAllGather, Op::kAllReduce, Op::kReduceScatter}) {
      std::vector<std::string> wrong(kThreadsPerRank);
      std::vector<std::thread> threads;
      for (int t = 0; t < kThreadsPerRank; ++t) {
        threads.emplace_back([&, t] {
          try {
            wrong[t] = calls_of_one_thread(*comm, op, count);
          } catch (const std::exception& e) {
            wrong[t] = std::string("threw: ") + e.what();
          }
        });
      }
      for (auto& t : threads) t.join();
      for (int t = 0; t < kThreadsPerRank; ++t) {
        ASSERT_EQ(wrong[t], "") << "rank " << r << " thread " << t;
      }
    }
  });
}

TEST(ConcurrentCalls, ThreadsOfEachRankShareAnShmCommunicator) {
  threads_share_each_rank(2, runtime::builtin_platform(), {}, 3001);
}

TEST(ConcurrentCalls, ThreadsOfEachRankShareAGlooCommunicator) {
  CommunicatorOptions gloo_only;
  gloo_only.disabled = {Backend::kShm};
  threads_share_each_rank(2, runtime::builtin_platform(), gloo_only, 3001);
}

TEST(ConcurrentCalls, ThreadsOfEachRankShareAHierCommunicator) {
  threads_share_each_rank(4, test::nodes_in_turn(2), {}, 1001);
}

// Broadcast runs all_gather calls inside its own turn: its thread re-enters the turn, and the
// other thread's broadcast waits for the whole of it. Interleaved chunks (262144 and 37856
// elements) would pair one thread's chunk with another's.
TEST(ConcurrentCalls, BroadcastsFromTwoThreadsAreServedWhole) {
  constexpr std::size_t n = 300'000;
  test::on_ranks(make_thread_group(2), [&](int r, std::shared_ptr<Bootstrap> bs) {
    auto comm = Communicator::create(bs);
    std::vector<std::string> wrong(2);
    std::vector<std::thread> threads;
    for (int t = 0; t < 2; ++t) {
      threads.emplace_back([&, t] {
        std::vector<float> v(n);
        for (int call = 0; call < 4 && wrong[t].empty(); ++call) {
          for (std::size_t i = 0; i < n; ++i) v[i] = value(r, i);
          comm->broadcast(v.data(), n, DataType::kFloat32, 1);
          wrong[t] = first_wrong("broadcast", call, v, [](std::size_t i) { return value(1, i); });
        }
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(wrong[0], "") << "rank " << r;
    EXPECT_EQ(wrong[1], "") << "rank " << r;
  });
}

// Turns are served in the order the threads asked for them, and a thread that holds the turn
// enters again without waiting for itself.
TEST(CallQueue, ServesTurnsInArrivalOrderAndLetsTheHolderReenter) {
  runtime::CallQueue queue;
  std::vector<int> served;
  std::mutex served_mutex;
  std::vector<std::thread> waiters;
  {
    runtime::CallQueue::Turn first(queue);
    runtime::CallQueue::Turn again(queue);  // would deadlock without re-entry
    for (int t = 0; t < 6; ++t) {
      waiters.emplace_back([&, t] {
        runtime::CallQueue::Turn turn(queue);
        std::lock_guard<std::mutex> lock(served_mutex);
        served.push_back(t);
      });
      // The next thread asks only once this one waits.
      const auto limit = std::chrono::steady_clock::now() + 10s;
      while (queue.waiting() != t + 1 && std::chrono::steady_clock::now() < limit) {
        std::this_thread::sleep_for(1ms);
      }
      ASSERT_EQ(queue.waiting(), t + 1);
    }
  }
  for (auto& w : waiters) w.join();
  EXPECT_EQ(served, (std::vector<int>{0, 1, 2, 3, 4, 5}));
}

// A fork() child holding its parent's communicator: every call is refused naming fork(), and
// dropping it tears nothing of the parent's group down (Gloo's sockets share an epoll set with the
// parent, shm's segments and the store connection are the parent's). The parent's group then
// calls on as before. Runs on gloo and shm.
void fork_child_leaves_the_group_alone(const CommunicatorOptions& options) {
  test::on_ranks(make_thread_group(2), [&](int r, std::shared_ptr<Bootstrap> bs) {
    auto comm = Communicator::create(bs, options);
    std::vector<float> v(5000, static_cast<float>(r + 1));
    comm->all_reduce(v.data(), v.data(), v.size(), DataType::kFloat32, ReduceOp::kSum);
    if (r == 0) {
      const pid_t child = fork();
      ASSERT_GE(child, 0);
      if (child == 0) {
        // Only this thread exists here; report through the exit status alone.
        int status = 0;
        try {
          comm->all_reduce(v.data(), v.data(), v.size(), DataType::kFloat32, ReduceOp::kSum);
          status = 10;  // took part in the parent's group
        } catch (const Error& e) {
          if (std::string(e.what()).find("fork()") == std::string::npos) status = 11;
          if (e.code() != ErrorCode::kInvalidInput) status = 12;
        }
        try {
          comm->abort("from the child");
          status = 13;
        } catch (const Error&) {
        }
        comm.reset();  // must not touch the parent's group
        _exit(status);
      }
      // Bounded: a child that hangs in the inherited communicator's destructor fails the test.
      int status = 0;
      bool ended = false;
      const auto limit = std::chrono::steady_clock::now() + 20s;
      while (!(ended = waitpid(child, &status, WNOHANG) == child) &&
             std::chrono::steady_clock::now() < limit) {
        std::this_thread::sleep_for(10ms);
      }
      if (!ended) {
        kill(child, SIGKILL);
        waitpid(child, &status, 0);
        FAIL() << "the child did not end within 20 s (stuck tearing down the parent's group)";
      }
      ASSERT_TRUE(WIFEXITED(status)) << "the child died: status " << status;
      ASSERT_EQ(WEXITSTATUS(status), 0) << "10: a call ran; 11: no fork() in the message; 12: not "
                                           "kInvalidInput; 13: abort ran";
    }
    for (int call = 0; call < 3; ++call) {
      std::vector<float> w(5000);
      for (std::size_t i = 0; i < w.size(); ++i) w[i] = value(r, i);
      comm->all_reduce(w.data(), w.data(), w.size(), DataType::kFloat32, ReduceOp::kSum);
      for (std::size_t i = 0; i < w.size(); ++i) ASSERT_EQ(w[i], value(0, i) + value(1, i)) << i;
    }
  });
}

TEST(ForkedChild, IsRefusedAndLeavesAGlooGroupAlone) {
  CommunicatorOptions gloo_only;
  gloo_only.disabled = {Backend::kShm};
  fork_child_leaves_the_group_alone(gloo_only);
}

TEST(ForkedChild, IsRefusedAndLeavesAnShmGroupAlone) {
  fork_child_leaves_the_group_alone({});
}

}  // namespace
}  // namespace tpcomm
