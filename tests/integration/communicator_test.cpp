// The communicator in one process, one thread per rank: agreement, voted set-up with a failing
// step, abort semantics, and 200 create/destroy cycles without leaks.
#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <thread>

#include "thread_ranks.hpp"
#include "tpcomm/communicator.hpp"
#include "tpcomm/error.hpp"
#include "tpcomm/tcp_store.hpp"

namespace tpcomm {
namespace {

using namespace std::chrono_literals;

using test::on_ranks;
using test::ScopedEnv;
using test::TempFile;

// Segments in /dev/shm made by this process (tests in other processes run in parallel).
std::size_t own_segments() {
  std::size_t n = 0;
  const std::string mine = "-" + std::to_string(getpid()) + "-";
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d)) n += std::string(e->d_name).find(mine) != std::string::npos;
    closedir(d);
  }
  return n;
}

// bf16 from fp32 bits, round to nearest even, written here from the bit patterns (not the
// library's conversion); no NaNs in these tests.
std::uint16_t bf16_of(float f) {
  std::uint32_t bits;
  std::memcpy(&bits, &f, 4);
  const std::uint32_t lower = bits & 0xffffu;
  std::uint32_t upper = bits >> 16;
  if (lower > 0x8000u || (lower == 0x8000u && (upper & 1u))) ++upper;
  return static_cast<std::uint16_t>(upper);
}
float float_of_bf16(std::uint16_t h) {
  const std::uint32_t bits = static_cast<std::uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// A value that differs by rank and by element, exact in fp32 sums of a few ranks.
float rank_value(int rank, std::size_t i) {
  return static_cast<float>((rank + 1) * 1000 + static_cast<int>(i % 97));
}

// Expects every element of `data` to be `expect(i)`; reports the first few that are not.
template <typename Expect>
void expect_every_element(const std::vector<float>& data, Expect expect, const std::string& what) {
  int reported = 0;
  for (std::size_t i = 0; i < data.size(); ++i) {
    if (data[i] != expect(i) && reported++ < 5) {
      ADD_FAILURE() << what << ": element " << i << " is " << data[i] << ", expected " << expect(i);
    }
  }
  EXPECT_EQ(reported, 0) << what << ": elements wrong";
}

std::size_t count_entries(const char* dir) {
  std::size_t n = 0;
  if (DIR* d = opendir(dir)) {
    while (readdir(d) != nullptr) ++n;
    closedir(d);
  }
  return n;
}

TEST(Communicator, ThreadsAgreeAndAllReduceBitwiseIdentically) {
  auto group = make_thread_group(3);
  std::vector<std::vector<std::uint16_t>> results(3);
  std::vector<std::string> digests(3);
  on_ranks(group, [&](int r, std::shared_ptr<Bootstrap> bs) {
    auto comm = Communicator::create(bs);
    EXPECT_EQ(comm->size(), 3);
    EXPECT_EQ(comm->plan().nodes, 1);
    std::vector<float> in(1000);
    for (std::size_t i = 0; i < in.size(); ++i)
      in[i] = 0.001f * static_cast<float>(i) + static_cast<float>(r);
    std::vector<std::uint16_t> bf(in.size());
    for (std::size_t i = 0; i < in.size(); ++i) bf[i] = bf16_of(in[i]);
    comm->all_reduce(bf.data(), bf.data(), bf.size(), DataType::kBFloat16, ReduceOp::kSum);
    results[static_cast<std::size_t>(r)] = bf;
    digests[static_cast<std::size_t>(r)] = comm->plan().digest;
  });
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
  EXPECT_EQ(digests[0], digests[2]);
  // The exact fp32 sum of the three ranks' bf16 inputs (three 8-bit mantissas below 4 add
  // exactly), rounded once to bf16: every element, bit for bit.
  int wrong = 0;
  for (std::size_t i = 0; i < 1000; ++i) {
    float sum = 0;
    for (int r = 0; r < 3; ++r)
      sum += float_of_bf16(bf16_of(0.001f * static_cast<float>(i) + static_cast<float>(r)));
    if (results[0][i] != bf16_of(sum) && wrong++ < 5) {
      ADD_FAILURE() << "element " << i << ": 0x" << std::hex << results[0][i] << ", expected 0x"
                    << bf16_of(sum);
    }
  }
  EXPECT_EQ(wrong, 0);
}

TEST(Communicator, OneNodeGroupsUseShm) {
  auto group = make_thread_group(2);
  on_ranks(group, [&](int, std::shared_ptr<Bootstrap> bs) {
    auto comm = Communicator::create(bs);
    const auto& ar = comm->plan().ops.at(Op::kAllReduce);
    EXPECT_TRUE(ar.is_eligible(Backend::kShm));
    EXPECT_EQ(ar.table.front().backend, Backend::kShm);
    std::vector<float> data(4099);
    for (std::size_t i = 0; i < data.size(); ++i) data[i] = rank_value(comm->rank(), i);
    comm->all_reduce(data.data(), data.data(), data.size(), DataType::kFloat32, ReduceOp::kSum);
    expect_every_element(
        data, [](std::size_t i) { return rank_value(0, i) + rank_value(1, i); }, "shm sum");
    // Host buffers are never captured: nothing to register, and no graph table; no GPU.
    EXPECT_EQ(comm->register_graph_buffers(), 0u);
    EXPECT_EQ(comm->cuda_device(), -1);
    EXPECT_EQ(&comm->plan(Mode::kEager), &comm->plan());
    EXPECT_THROW(comm->plan(Mode::kGraph), Error);
  });
}

TEST(Communicator, AllGatherOfBlocksAboveTheStreamingThresholdKeepsEveryElement) {
  // Each rank's own block is copied with streaming stores from 2 MiB; 3 elements more put rank
  // 1's block off a cache line, so the aligned head and the tail are taken too.
  const std::size_t block = (2u << 20) / sizeof(float) + 3;
  auto group = make_thread_group(2);
  on_ranks(group, [&](int r, std::shared_ptr<Bootstrap> bs) {
    auto comm = Communicator::create(bs);
    std::vector<float> mine(block);
    for (std::size_t i = 0; i < block; ++i) mine[i] = rank_value(r, i);
    std::vector<float> all(2 * block, -1.0f);
    comm->all_gather(mine.data(), all.data(), block, DataType::kFloat32);
    expect_every_element(
        all, [&](std::size_t i) { return rank_value(static_cast<int>(i / block), i % block); },
        "all_gather rank " + std::to_string(r));
  });
}

TEST(Communicator, TuningFileFromTheEnvironmentReplacesTheBuiltInTable) {
  TempFile file(R"({"tpcomm_tuning": 1, "entries": [{"device": "cpu", "world_size": 2, "ops": {
      "all_reduce": [{"max_bytes": 1024, "use": [{"backend": "gloo"}]},
                     {"max_bytes": null, "use": [{"backend": "shm", "algorithm": "two_shot"}]}]}}]})");
  ScopedEnv tuning("TPCOMM_TUNING", file.path().c_str());
  on_ranks(make_thread_group(2), [&](int r, std::shared_ptr<Bootstrap> bs) {
    auto comm = Communicator::create(bs);
    const auto& table = comm->plan().ops.at(Op::kAllReduce).table;
    ASSERT_EQ(table.size(), 2u);
    EXPECT_EQ(table[0].backend, Backend::kGloo);
    EXPECT_EQ(table[1].backend, Backend::kShm);
    EXPECT_EQ(table[1].algorithm, Algorithm::kTwoShot);
    EXPECT_NE(comm->plan().tuning.find(file.path()), std::string::npos) << comm->plan().tuning;
    for (std::size_t n : {16u, 5000u}) {  // one call through each row
      std::vector<float> data(n);
      for (std::size_t i = 0; i < n; ++i) data[i] = rank_value(r, i);
      comm->all_reduce(data.data(), data.data(), n, DataType::kFloat32, ReduceOp::kSum);
      expect_every_element(
          data, [](std::size_t i) { return rank_value(0, i) + rank_value(1, i); },
          std::to_string(n) + " elements");
    }
  });
}

TEST(Communicator, UnreadableTuningFileIsAnErrorOnEveryRankNamingTheFile) {
  TempFile file(R"({"tpcomm_tuning": 1, "entries": [{"device": "cpu"}]})");
  ScopedEnv tuning("TPCOMM_TUNING", file.path().c_str());
  const auto errors = test::errors_on_ranks(
      make_thread_group(2), [](int, std::shared_ptr<Bootstrap> bs) { Communicator::create(bs); });
  for (const auto& e : errors) {
    EXPECT_NE(e.find("no plan: ranks 0-1: tuning file (TPCOMM_TUNING) " + file.path()),
              std::string::npos)
        << e;
    EXPECT_NE(e.find("docs/tuning.md"), std::string::npos) << e;
  }
}

TEST(Communicator, SetUpStepFailingOnOneRankDisablesTheBackendEverywhere) {
  ScopedEnv fault("TPCOMM_FAULT", "shm.map:fail@1");
  auto group = make_thread_group(3);
  on_ranks(group, [&](int, std::shared_ptr<Bootstrap> bs) {
    auto comm = Communicator::create(bs);
    for (const auto& [op, p] : comm->plan().ops) {
      EXPECT_FALSE(p.is_eligible(Backend::kShm));
      const std::string& why = p.rejected.at(Backend::kShm);
      EXPECT_NE(why.find("disabled by its set-up: step shm.map failed on rank 1: injected fault"),
                std::string::npos)
          << why;
      for (const auto& row : p.table) EXPECT_EQ(row.backend, Backend::kGloo);
    }
    std::vector<float> data(1000);
    for (std::size_t i = 0; i < data.size(); ++i) data[i] = rank_value(comm->rank(), i);
    comm->all_reduce(data.data(), data.data(), data.size(), DataType::kFloat32, ReduceOp::kAvg);
    // (1000 + 2000 + 3000 + 3 x (i % 97)) / 3, exact in fp32.
    expect_every_element(
        data, [](std::size_t i) { return 2000.0f + static_cast<float>(i % 97); }, "gloo avg");
  });
}

TEST(Communicator, OptionsDisableABackendAndThePlanSaysWho) {
  on_ranks(make_thread_group(2), [&](int r, std::shared_ptr<Bootstrap> bs) {
    CommunicatorOptions o;
    o.disabled = {Backend::kShm};
    auto comm = Communicator::create(bs, o);
    for (const auto& [op, p] : comm->plan().ops) {
      EXPECT_EQ(p.rejected.at(Backend::kShm), "disabled by CommunicatorOptions::disabled");
      for (const auto& row : p.table) EXPECT_EQ(row.backend, Backend::kGloo);
    }
    std::vector<float> data(300);
    for (std::size_t i = 0; i < data.size(); ++i) data[i] = rank_value(r, i);
    comm->all_reduce(data.data(), data.data(), data.size(), DataType::kFloat32, ReduceOp::kMax);
    expect_every_element(
        data, [](std::size_t i) { return rank_value(1, i); }, "gloo max");
  });
}

TEST(Communicator, DisablingTheFallbackInTheOptionsOfOneRankFailsEveryRankWithTheReason) {
  const auto errors = test::errors_on_ranks(make_thread_group(3), [](int r, auto bs) {
    CommunicatorOptions o;
    if (r == 2) o.disabled = {Backend::kGloo};
    Communicator::create(bs, o);
  });
  for (const auto& e : errors) {
    EXPECT_NE(e.find("no plan: rank 2: CommunicatorOptions::disabled: gloo cannot be disabled"),
              std::string::npos)
        << e;
  }
}

TEST(Communicator, FallbackEngineFailingAtSetUpIsAnErrorOnEveryRank) {
  ScopedEnv fault("TPCOMM_FAULT", "gloo.connect:fail@1");
  ScopedEnv no_shm("TPCOMM_DISABLE", "shm");  // so that gloo carries the calls
  const auto errors = test::errors_on_ranks(
      make_thread_group(2), [](int, std::shared_ptr<Bootstrap> bs) { Communicator::create(bs); });
  for (const auto& e : errors) {
    EXPECT_NE(e.find("the fallback engine gloo could not be set up: step gloo.connect "
                     "failed on rank 1"),
              std::string::npos)
        << e;
  }
}

TEST(Communicator, AbortFailsLaterCallsWithTheOriginalCauseAndReleasesPeers) {
  auto group = make_thread_group(2);
  on_ranks(group, [&](int r, std::shared_ptr<Bootstrap> bs) {
    CommunicatorOptions o;
    o.timeout = 5s;
    auto comm = Communicator::create(bs, o);
    std::vector<float> data(100000, 1.0f);
    comm->all_reduce(data.data(), data.data(), data.size(), DataType::kFloat32, ReduceOp::kSum);
    bs->barrier("before abort", Deadline::after(5s));
    if (r == 0) {
      comm->abort("testing abort");
      EXPECT_TRUE(comm->aborted());
    }
    const auto start = Deadline::Clock::now();
    try {
      comm->all_reduce(data.data(), data.data(), data.size(), DataType::kFloat32, ReduceOp::kSum);
      ADD_FAILURE() << "rank " << r << ": a call must fail after an abort";
    } catch (const Error& e) {
      if (r == 0) {
        EXPECT_EQ(e.code(), ErrorCode::kAborted);
        EXPECT_NE(std::string(e.what()).find("aborted by the caller: testing abort"),
                  std::string::npos)
            << e.what();
      } else {
        EXPECT_LT(Deadline::Clock::now() - start, 4s) << "the peer must not wait for its deadline";
        EXPECT_NE(std::string(e.what()).find("a peer aborted first: rank 0: aborted by the caller"),
                  std::string::npos)
            << e.what();
      }
    }
    try {
      comm->all_gather(data.data(), data.data(), 1, DataType::kFloat32);
      ADD_FAILURE() << "later calls fail at once";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kAborted);
      EXPECT_NE(std::string(e.what()).find("was aborted earlier"), std::string::npos);
    }
  });
}

// A rank that arrives after its peers gave up on a call (it was stopped, or slow) must not
// complete that call from the inputs they had already posted: it used to, and went on.
TEST(Communicator, ARankArrivingAfterItsPeersAbortedFailsInsteadOfCompleting) {
  auto group = make_thread_group(3);
  std::vector<std::string> errors(3);
  on_ranks(group, [&](int r, std::shared_ptr<Bootstrap> bs) {
    CommunicatorOptions o;
    o.timeout = 1s;
    auto comm = Communicator::create(bs, o);
    std::vector<float> data(256, static_cast<float>(r));
    if (r == 1) std::this_thread::sleep_for(2500ms);  // its peers time out meanwhile
    try {
      comm->all_reduce(data.data(), data.data(), data.size(), DataType::kFloat32, ReduceOp::kSum);
    } catch (const Error& e) {
      errors[static_cast<std::size_t>(r)] = e.what();
      if (r == 1) {
        EXPECT_EQ(e.code(), ErrorCode::kAborted) << e.what();
      }
    }
  });
  for (int r : {0, 2}) {
    EXPECT_NE(errors[static_cast<std::size_t>(r)].find("rank 1 did not arrive within 1000 ms"),
              std::string::npos)
        << errors[static_cast<std::size_t>(r)];
  }
  EXPECT_NE(errors[1].find("aborted the group (all_reduce(float32 x 256, sum) #1"),
            std::string::npos)
      << "rank 1 completed a call its peers had given up on: " << errors[1];
}

TEST(Communicator, TwoHundredCreateDestroyCyclesLeakNothing) {
  TcpStoreServer server("127.0.0.1", 0);
  std::vector<std::shared_ptr<Bootstrap>> group;
  for (int r = 0; r < 2; ++r) {
    group.push_back(make_store_bootstrap(
        connect_tcp_store("127.0.0.1", server.port(), Deadline::after(5s)), r, 2));
  }
  auto cycle = [&](int cycles) {
    on_ranks(group, [&](int, std::shared_ptr<Bootstrap> bs) {
      for (int i = 0; i < cycles; ++i) {
        auto comm = Communicator::create(bs);
        float x = static_cast<float>(bs->rank() + 1);
        comm->all_reduce(&x, &x, 1, DataType::kFloat32, ReduceOp::kSum);
        if (x != 3.0f) throw std::runtime_error("wrong sum");
      }
    });
  };
  cycle(5);  // warm up: thread pools, first-use allocations
  const std::size_t fds = count_entries("/proc/self/fd");
  const std::size_t threads = count_entries("/proc/self/task");
  const std::size_t keys = server.key_count();
  const std::size_t shm = own_segments();
  cycle(200);
  EXPECT_EQ(count_entries("/proc/self/fd"), fds);
  EXPECT_EQ(count_entries("/proc/self/task"), threads);
  EXPECT_EQ(server.key_count(), keys);
  EXPECT_EQ(own_segments(), shm);
  EXPECT_EQ(shm, 0u);
  std::cout << "[ info ] after 200 cycles: " << fds << " fds, " << threads << " threads, " << keys
            << " store keys, unchanged\n";
}

}  // namespace
}  // namespace tpcomm
