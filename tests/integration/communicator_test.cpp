// The communicator in one process, one thread per rank: agreement, voted set-up with a failing
// step, abort semantics, and 200 create/destroy cycles without leaks.
#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <thread>

#include "thread_ranks.hpp"
#include "tpcomm/communicator.hpp"
#include "tpcomm/error.hpp"
#include "tpcomm/tcp_store.hpp"
#include "transport/common/convert.hpp"

namespace tpcomm {
namespace {

using namespace std::chrono_literals;

using test::on_ranks;
using test::ScopedEnv;

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
    transport::from_float(in.data(), DataType::kBFloat16, in.size(), bf.data());
    comm->all_reduce(bf.data(), bf.data(), bf.size(), DataType::kBFloat16, ReduceOp::kSum);
    results[static_cast<std::size_t>(r)] = bf;
    digests[static_cast<std::size_t>(r)] = comm->plan().digest;
  });
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
  EXPECT_EQ(digests[0], digests[2]);
  float v;
  transport::to_float(&results[0][10], DataType::kBFloat16, 1, &v);
  EXPECT_NEAR(v, 3 * 0.01f + 3.0f, 0.05f);
}

TEST(Communicator, OneNodeGroupsUseShm) {
  auto group = make_thread_group(2);
  on_ranks(group, [&](int, std::shared_ptr<Bootstrap> bs) {
    auto comm = Communicator::create(bs);
    const auto& ar = comm->plan().ops.at(Op::kAllReduce);
    EXPECT_TRUE(ar.is_eligible(Backend::kShm));
    EXPECT_EQ(ar.table.front().backend, Backend::kShm);
    std::vector<float> data(64, static_cast<float>(comm->rank() + 1));
    comm->all_reduce(data.data(), data.data(), data.size(), DataType::kFloat32, ReduceOp::kSum);
    EXPECT_EQ(data[5], 3.0f);
    // Host buffers are never captured: nothing to register, and no graph table.
    EXPECT_EQ(comm->register_graph_buffers(), 0u);
    EXPECT_EQ(&comm->plan(Mode::kEager), &comm->plan());
    EXPECT_THROW(comm->plan(Mode::kGraph), Error);
  });
}

// Writes `text` to a fresh file under /tmp and removes it when done.
class TempFile {
 public:
  explicit TempFile(const std::string& text) {
    char name[] = "/tmp/tpcomm_tuning_XXXXXX";
    const int fd = mkstemp(name);
    path_ = name;
    EXPECT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
    close(fd);
  }
  ~TempFile() { unlink(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

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
      std::vector<float> data(n, static_cast<float>(r + 1));
      comm->all_reduce(data.data(), data.data(), n, DataType::kFloat32, ReduceOp::kSum);
      EXPECT_EQ(data[n - 1], 3.0f) << n;
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
    std::vector<float> data(1000, 2.0f);
    comm->all_reduce(data.data(), data.data(), data.size(), DataType::kFloat32, ReduceOp::kAvg);
    EXPECT_EQ(data[999], 2.0f);
  });
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
        float x = 1.0f;
        comm->all_reduce(&x, &x, 1, DataType::kFloat32, ReduceOp::kSum);
        if (x != 2.0f) throw std::runtime_error("wrong sum");
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
