// A rank's thread team (transport/cpu/thread_team) and the shm operations split over it: every part
// runs once, part 0 on the caller; a part's exception reaches the caller after all parts finished;
// the workers run on their creator's CPUs and sleep between calls; and a reduction's result is
// bitwise the same for every thread count (1-7) and every kernel variant this CPU runs, checked
// element by element against a scalar reference (float32) and against each other.
#include <gtest/gtest.h>

#include <sched.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <random>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "transport/cpu/team_ops.hpp"
#include "transport/cpu/team_size.hpp"
#include "transport/cpu/thread_team.hpp"

namespace tpcomm {
namespace {

using kernels::cpu::KernelIsa;
using transport::cpu::ThreadTeam;

TEST(ThreadTeam, RunsEveryPartOnceWithPartZeroOnTheCaller) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadTeam team(threads);
    ASSERT_EQ(team.size(), threads);
    for (int parts = 1; parts <= threads; ++parts) {
      for (int call = 0; call < 50; ++call) {  // back-to-back calls reuse the sleeping workers
        std::vector<std::atomic<int>> runs(static_cast<std::size_t>(threads));
        std::thread::id part0;
        team.run(parts, [&](int part) {
          runs[static_cast<std::size_t>(part)].fetch_add(1);
          if (part == 0) part0 = std::this_thread::get_id();
        });
        for (int p = 0; p < threads; ++p) {
          EXPECT_EQ(runs[static_cast<std::size_t>(p)].load(), p < parts ? 1 : 0)
              << "threads " << threads << " parts " << parts << " part " << p;
        }
        EXPECT_EQ(part0, std::this_thread::get_id());
      }
    }
  }
}

TEST(ThreadTeam, AFailingPartIsThrownAfterEveryPartFinished) {
  ThreadTeam team(3);
  std::atomic<int> finished{0};
  try {
    team.run(3, [&](int part) {
      if (part == 2) throw std::runtime_error("part 2 failed");
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      finished.fetch_add(1);
    });
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "part 2 failed");
  }
  EXPECT_EQ(finished.load(), 2);
  // The team still works.
  std::atomic<int> runs{0};
  team.run(3, [&](int) { runs.fetch_add(1); });
  EXPECT_EQ(runs.load(), 3);
}

TEST(ThreadTeam, WorkersRunOnTheCreatorsCpus) {
  const cpu_set_t all = transport::cpu::current_cpus();
  int last = -1;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &all)) last = cpu;
  }
  ASSERT_GE(last, 0);
  std::set<int> seen;
  std::thread creator([&] {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(last, &one);
    ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
    ThreadTeam team(3);
    std::mutex m;
    team.run(3, [&](int) {
      const cpu_set_t mine = transport::cpu::current_cpus();
      std::lock_guard<std::mutex> lock(m);
      for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
        if (CPU_ISSET(cpu, &mine)) seen.insert(cpu);
      }
    });
  });
  creator.join();
  EXPECT_EQ(seen, std::set<int>{last});
}

double process_cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) / 1e6;
}

TEST(ThreadTeam, WorkersSleepBetweenCalls) {
  ThreadTeam team(4);
  team.run(4, [](int) {});
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const double before = process_cpu_ms();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const double used = process_cpu_ms() - before;
  // Three spinning workers would use about 900 ms of CPU (600 on two cores); a sleeping team
  // uses next to nothing, and the margin is for a busy machine's noise.
  EXPECT_LT(used, 100.0) << "the idle team used " << used << " ms of CPU in 300 ms";
}

TEST(TeamChunks, CoverEveryElementOnceAlignedAndAboutEightPerThread) {
  for (std::size_t n : {0u, 1u, 63u, 64u, 65u, 1000u, 4096u, 100001u}) {
    for (int parts = 1; parts <= 7; ++parts) {
      for (std::size_t min_units : {0u, 1u, 100u, 5000u}) {
        const auto c = transport::cpu::chunks_for(n, parts, 64, min_units);
        const std::string where = "n " + std::to_string(n) + " parts " + std::to_string(parts) +
                                  " min " + std::to_string(min_units);
        if (n == 0) {
          EXPECT_EQ(c.count, 0u) << where;
          continue;
        }
        EXPECT_EQ(c.size % 64, 0u) << where;
        EXPECT_GE(c.size, min_units) << where;
        EXPECT_GE(c.size * c.count, n) << where;
        EXPECT_LT(c.size * (c.count - 1), n) << where << ": an empty last chunk";
        EXPECT_LE(c.count, static_cast<std::size_t>(parts) * transport::cpu::kChunksPerThread)
            << where;
      }
    }
  }
  // 1 MiB of float32 for two threads: 16 chunks of 16 Ki elements.
  const auto c = transport::cpu::chunks_for(1 << 18, 2, 64, 1);
  EXPECT_EQ(c.count, 16u);
  EXPECT_EQ(c.size, 16384u);
  EXPECT_EQ(transport::cpu::share_count(10, 8), 1);
  EXPECT_EQ(transport::cpu::share_count(64 << 10, 8), 4);
  EXPECT_EQ(transport::cpu::share_count(1 << 20, 8), 8);
}

// Each element is done once, whichever thread takes its chunk, and a thread that is slow (here:
// the worker sleeps 5 ms in each chunk it takes, as a core shared with another program would
// lag) takes fewer chunks than an equal share, so the call does not wait for it.
TEST(TeamChunks, EveryElementOnceAndASlowThreadTakesFewerChunks) {
  ThreadTeam team(2);
  const std::size_t n = 16 * 64;
  std::vector<std::atomic<int>> done(n);
  std::atomic<int> by_caller{0}, chunks{0};
  transport::cpu::run_chunks(team, 2, n, 64, 64, [&](int part, std::size_t first, std::size_t k) {
    EXPECT_EQ(k, 64u);
    for (std::size_t i = first; i < first + k; ++i) done[i].fetch_add(1);
    chunks.fetch_add(1);
    if (part == 0) {
      by_caller.fetch_add(1);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(done[i].load(), 1) << "element " << i;
  EXPECT_EQ(chunks.load(), 16);
  EXPECT_GE(by_caller.load(), 12) << "the caller took " << by_caller.load()
                                  << " of 16 chunks while the worker slept in each of its own";
}

cpu_set_t cpus_of(std::initializer_list<int> list) {
  cpu_set_t s;
  CPU_ZERO(&s);
  for (int c : list) CPU_SET(c, &s);
  return s;
}

TEST(TeamSize, SharesARanksCpusWithTheRanksThatMayRunOnThem) {
  using transport::cpu::team_size;
  // Two ranks bound to four CPUs each on an 8-CPU host: four threads each.
  const std::vector<cpu_set_t> split = {cpus_of({0, 1, 2, 3}), cpus_of({4, 5, 6, 7})};
  EXPECT_EQ(team_size(0, split, 1, 2, 8).threads, 4);
  // Four ranks all bound to the same four CPUs: one each.
  const std::vector<cpu_set_t> same(4, cpus_of({0, 1, 2, 3}));
  EXPECT_EQ(team_size(0, same, 2, 4, 8).threads, 1);
  // Unbound ranks share the whole machine with every rank on it, inside the group or not.
  const std::vector<cpu_set_t> unbound(2, cpus_of({0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(team_size(0, unbound, 0, 2, 8).threads, 4);
  EXPECT_EQ(team_size(0, unbound, 0, 4, 8).threads, 2);
  EXPECT_EQ(team_size(0, unbound, 0, 16, 8).threads, 1);
  // A rank on one CPU works alone; the user's number wins and says where it came from.
  EXPECT_EQ(team_size(0, {cpus_of({3})}, 0, 1, 8).threads, 1);
  const auto asked = team_size(3, same, 0, 4, 8);
  EXPECT_EQ(asked.threads, 3);
  EXPECT_NE(asked.why.find("TPCOMM_THREADS"), std::string::npos) << asked.why;
  EXPECT_NE(team_size(0, split, 0, 2, 8).why.find("4 CPUs shared by 1 ranks"), std::string::npos)
      << team_size(0, split, 0, 2, 8).why;
}

// Finite values of every magnitude (no NaN: its payload is not part of any kernel's contract).
std::vector<float> random_values(std::size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> value(-4.0f, 4.0f);
  std::vector<float> out(n);
  for (auto& v : out) {
    const unsigned pick = rng() % 16;
    v = pick == 0 ? -0.0f : pick == 1 ? 1e-40f : pick == 2 ? 3e38f : value(rng);
  }
  return out;
}

std::vector<std::uint8_t> encode(const std::vector<float>& v, DataType t) {
  std::vector<std::uint8_t> out(v.size() * size_of(t));
  if (t == DataType::kFloat32) {
    std::memcpy(out.data(), v.data(), out.size());
    return out;
  }
  for (std::size_t i = 0; i < v.size(); ++i) {
    std::uint32_t b;
    std::memcpy(&b, &v[i], 4);
    const std::uint16_t h = t == DataType::kBFloat16
                                ? static_cast<std::uint16_t>(b >> 16)
                                : static_cast<std::uint16_t>(
                                      ((b >> 16) & 0x8000u) |
                                      (static_cast<std::uint32_t>(std::abs(v[i]) * 1000) % 0x7c00));
    std::memcpy(out.data() + i * 2, &h, 2);
  }
  return out;
}

TEST(TeamReduce, BitwiseTheSameForEveryThreadCountAndVariant) {
  std::mt19937 rng(36);
  std::vector<KernelIsa> isas;
  for (KernelIsa isa : kernels::cpu::kAllKernelIsas) {
    if (kernels::cpu::cpu_runs(isa)) isas.push_back(isa);
  }
  std::printf("variants this CPU runs: %zu (of 4)\n", isas.size());
  std::vector<std::unique_ptr<ThreadTeam>> teams;
  for (int t = 1; t <= 7; ++t) teams.push_back(std::make_unique<ThreadTeam>(t));
  for (DataType type : {DataType::kFloat32, DataType::kBFloat16, DataType::kFloat16}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax}) {
      for (int ranks : {2, 3, 4}) {
        // Sizes that give every thread count shares of several vectors and odd tails.
        const std::size_t count = 3 * (64 << 10) / size_of(type) + 37;
        std::vector<std::vector<float>> values;
        std::vector<std::vector<std::uint8_t>> slots;
        std::vector<const void*> srcs;
        for (int r = 0; r < ranks; ++r) {
          values.push_back(random_values(count, rng));
          slots.push_back(encode(values.back(), type));
        }
        for (auto& s : slots) srcs.push_back(s.data());
        std::vector<std::uint8_t> first;
        for (KernelIsa isa : isas) {
          for (auto& team : teams) {
            std::vector<std::uint8_t> out(count * size_of(type), 0xa5);
            transport::cpu::team_reduce(team.get(), isa, srcs.data(), ranks, count, type, op,
                                        out.data());
            if (first.empty()) {
              first = out;
              if (type == DataType::kFloat32 && op == ReduceOp::kSum) {
                for (std::size_t i = 0; i < count; ++i) {
                  float acc = values[0][i];
                  for (int r = 1; r < ranks; ++r) acc += values[static_cast<std::size_t>(r)][i];
                  float got;
                  std::memcpy(&got, out.data() + i * 4, 4);
                  ASSERT_EQ(std::memcmp(&got, &acc, 4), 0) << "element " << i;
                }
              }
              continue;
            }
            ASSERT_EQ(out, first) << to_string(type) << " " << to_string(op) << " ranks " << ranks
                                  << " variant " << kernels::cpu::to_string(isa) << " threads "
                                  << team->size();
          }
        }
      }
    }
  }
}

TEST(TeamCopy, EveryByteForEveryThreadCountStreamingOrNot) {
  std::vector<std::uint8_t> from((1 << 20) + 77);
  for (std::size_t i = 0; i < from.size(); ++i) from[i] = static_cast<std::uint8_t>(i * 131 + 7);
  for (int t = 1; t <= 4; ++t) {
    ThreadTeam team(t);
    for (bool streaming : {false, true}) {
      std::vector<std::uint8_t> to(from.size() + 3, 0);
      transport::cpu::team_copy(&team, to.data() + 3, from.data(), from.size(), streaming);
      EXPECT_EQ(std::memcmp(to.data() + 3, from.data(), from.size()), 0)
          << t << " threads, streaming " << streaming;
      EXPECT_EQ(to[0] + to[1] + to[2], 0);
    }
  }
}

}  // namespace
}  // namespace tpcomm
