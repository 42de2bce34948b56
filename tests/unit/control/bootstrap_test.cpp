// Bootstraps: all-gather, broadcast and barrier over threads and over the TCP store; a
// rendezvous that times out names the ranks that did not arrive; keys do not pile up.
#include <gtest/gtest.h>

#include <thread>

#include "tpcomm/bootstrap.hpp"
#include "tpcomm/error.hpp"
#include "tpcomm/tcp_store.hpp"

namespace tpcomm {
namespace {

using namespace std::chrono_literals;

// Runs fn(rank) on one thread per rank and collects what each returned or threw.
template <typename Fn>
std::vector<std::string> on_threads(int n, Fn fn) {
  std::vector<std::string> out(static_cast<std::size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        out[static_cast<std::size_t>(r)] = fn(r);
      } catch (const Error& e) {
        out[static_cast<std::size_t>(r)] = std::string("error: ") + e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

std::vector<std::shared_ptr<Bootstrap>> store_group(TcpStoreServer& server, int n) {
  std::vector<std::shared_ptr<Bootstrap>> out;
  for (int r = 0; r < n; ++r) {
    out.push_back(make_store_bootstrap(
        connect_tcp_store("127.0.0.1", server.port(), Deadline::after(5s)), r, n));
  }
  return out;
}

class BootstrapKinds : public ::testing::TestWithParam<std::string> {
 protected:
  std::vector<std::shared_ptr<Bootstrap>> group(int n) {
    if (GetParam() == "threads") return make_thread_group(n);
    server_ = std::make_unique<TcpStoreServer>("127.0.0.1", 0);
    return store_group(*server_, n);
  }
  std::unique_ptr<TcpStoreServer> server_;
};

TEST_P(BootstrapKinds, AllGatherBroadcastBarrier) {
  auto g = group(4);
  auto results = on_threads(4, [&](int r) {
    auto& bs = *g[static_cast<std::size_t>(r)];
    std::string text;
    for (int round = 0; round < 3; ++round) {
      auto all = bs.all_gather(Bytes{static_cast<std::uint8_t>(r * 10 + round)}, "test",
                               Deadline::after(5s));
      for (const auto& v : all) text += std::to_string(v.at(0)) + ",";
    }
    auto root =
        bs.broadcast(Bytes{42, static_cast<std::uint8_t>(r)}, 2, "bcast", Deadline::after(5s));
    bs.barrier("end", Deadline::after(5s));
    return text + "|" + std::to_string(root.at(0)) + "," + std::to_string(root.at(1));
  });
  for (const auto& r : results) EXPECT_EQ(r, "0,10,20,30,1,11,21,31,2,12,22,32,|42,2");
}

TEST_P(BootstrapKinds, RendezvousTimeoutNamesTheRanksThatDidNotJoin) {
  auto g = group(6);
  auto results = on_threads(6, [&](int r) -> std::string {
    if (r == 3 || r == 5) return "absent";
    g[static_cast<std::size_t>(r)]->all_gather(Bytes{1}, "facts exchange", Deadline::after(300ms));
    return "joined";
  });
  for (int r : {0, 1, 2, 4}) {
    EXPECT_EQ(results[static_cast<std::size_t>(r)],
              "error: ranks 3, 5 did not join within 300 ms (facts exchange)");
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, BootstrapKinds, ::testing::Values("threads", "store"));

TEST(StoreBootstrap, LaterRoundsSayArriveAndKeysDoNotAccumulate) {
  TcpStoreServer server("127.0.0.1", 0);
  auto g = store_group(server, 2);
  on_threads(2, [&](int r) {
    for (int i = 0; i < 50; ++i)
      g[static_cast<std::size_t>(r)]->barrier("loop", Deadline::after(5s));
    return std::string();
  });
  EXPECT_LE(server.key_count(), 2u);  // only the last round's keys
  auto results = on_threads(2, [&](int r) -> std::string {
    if (r == 1) return "absent";
    g[0]->barrier("plan agreement", Deadline::after(200ms));
    return "passed";
  });
  EXPECT_EQ(results[0], "error: rank 1 did not arrive within 200 ms (plan agreement)");
}

TEST(LaunchEnvironment, MissingVariablesAreExplained) {
  unsetenv("RANK");
  unsetenv("WORLD_SIZE");
  unsetenv("OMPI_COMM_WORLD_RANK");
  unsetenv("OMPI_COMM_WORLD_SIZE");
  try {
    bootstrap_from_environment(Deadline::after(1s));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidInput);
    EXPECT_NE(std::string(e.what()).find("set RANK and WORLD_SIZE"), std::string::npos);
  }
  setenv("RANK", "1", 1);  // torchrun-style launch without the store's address
  setenv("WORLD_SIZE", "2", 1);
  unsetenv("MASTER_ADDR");
  try {
    bootstrap_from_environment(Deadline::after(1s));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1 of 2: MASTER_ADDR and MASTER_PORT"),
              std::string::npos)
        << e.what();
  }
  unsetenv("RANK");
  unsetenv("WORLD_SIZE");
}

}  // namespace
}  // namespace tpcomm
