// hier without root: two simulated nodes of threads (the platform's node-identity hook), so the
// plan refuses shm and picks hier; every element of every dtype checked against an independent
// reference; a rank that never calls becomes a timeout naming it on every other rank.
#include <gtest/gtest.h>

#include <cstring>

#include "runtime/communicator_state.hpp"
#include "simulated_nodes.hpp"
#include "thread_ranks.hpp"
#include "tpcomm/tcp_store.hpp"

namespace tpcomm {
namespace {

using namespace std::chrono_literals;

// Ranks 0-1 on node 0, ranks 2-3 on node 1 (and so on for larger groups).
runtime::Platform two_nodes() {
  runtime::Platform p = runtime::builtin_platform();
  p.node_of_ranks = [](int size) {
    std::vector<int> node(static_cast<std::size_t>(size));
    for (int r = 0; r < size; ++r) node[static_cast<std::size_t>(r)] = r * 2 / size;
    return node;
  };
  return p;
}

// Exact in fp32 and bf16 (small integers), different on every rank and element.
float value(int rank, std::size_t i) {
  return static_cast<float>((rank + 1) * static_cast<int>(i % 13) - rank);
}

std::uint16_t bf16_of_exact(float f) {  // exact for these small integers: the high half
  std::uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return static_cast<std::uint16_t>(bits >> 16);
}

TEST(HierOnThreads, TwoSimulatedNodesPlanHierAndSumEveryElement) {
  const auto group = make_thread_group(4);
  test::on_ranks(group, [&](int r, std::shared_ptr<Bootstrap> bs) {
    CommunicatorOptions o;
    o.timeout = 20s;
    auto comm = runtime::create_communicator(bs, o, two_nodes());
    EXPECT_EQ(comm->plan().nodes, 2);
    const auto& ar = comm->plan().ops.at(Op::kAllReduce);
    EXPECT_FALSE(ar.is_eligible(Backend::kShm));
    ASSERT_EQ(ar.table.size(), 1u);
    EXPECT_EQ(ar.table[0].backend, Backend::kHier);
    for (std::size_t n : {1u, 7u, 1000u, 70001u}) {
      std::vector<float> f(n);
      std::vector<std::uint16_t> h(n);
      for (std::size_t i = 0; i < n; ++i) {
        f[i] = value(r, i);
        h[i] = bf16_of_exact(f[i]);
      }
      comm->all_reduce(f.data(), f.data(), n, DataType::kFloat32, ReduceOp::kSum);
      comm->all_reduce(h.data(), h.data(), n, DataType::kBFloat16, ReduceOp::kMax);
      int wrong = 0;
      for (std::size_t i = 0; i < n; ++i) {
        float sum = 0, max = value(0, i);
        for (int q = 0; q < 4; ++q) {
          sum += value(q, i);
          max = std::max(max, value(q, i));
        }
        if (f[i] != sum || h[i] != bf16_of_exact(max)) ++wrong;
      }
      EXPECT_EQ(wrong, 0) << "rank " << r << ", " << n << " elements";
    }
  });
}

// Values whose sums round, different on every rank and element.
float inexact(int rank, std::size_t i) {
  return 1.0f / static_cast<float>(3 + rank) +
         static_cast<float>(i % 101) * 1e-3f * static_cast<float>(rank % 2 == 0 ? 1 : -7);
}

// Sums that round, from Gloo's opening exchange (16 KiB) to its own algorithms (400 KB). 4 ranks
// on 2 nodes: every rank gets the bits of (v0 + v1) + (v2 + v3), each node's ranks first, then
// the nodes. 6 ranks dealt to 3 nodes in turn: every rank the same bits.
TEST(HierOnThreads, SmallAndStagedAllReducesGiveEveryRankTheSameRoundedSums) {
  const std::vector<std::size_t> sizes = {4095, 4096, 4097, 100000};
  for (const auto& [size, platform] :
       {std::pair{4, two_nodes()}, std::pair{6, test::nodes_in_turn(3)}}) {
    const auto group = make_thread_group(size);
    std::vector<std::vector<std::vector<float>>> results(static_cast<std::size_t>(size));
    test::on_ranks(
        group, [&, size = size, platform = platform](int r, std::shared_ptr<Bootstrap> bs) {
          CommunicatorOptions o;
          o.timeout = 20s;
          auto comm = runtime::create_communicator(bs, o, platform);
          for (std::size_t n : sizes) {
            std::vector<float> f(n);
            for (std::size_t i = 0; i < n; ++i) f[i] = inexact(r, i);
            comm->all_reduce(f.data(), f.data(), n, DataType::kFloat32, ReduceOp::kSum);
            int wrong = 0;
            for (std::size_t i = 0; i < n && size == 4; ++i) {
              const float want = (inexact(0, i) + inexact(1, i)) + (inexact(2, i) + inexact(3, i));
              if (std::memcmp(&f[i], &want, 4) != 0 && wrong++ < 3) {
                ADD_FAILURE() << "rank " << r << ", " << n << " elements, element " << i << ": "
                              << f[i] << " instead of " << want;
              }
            }
            results[static_cast<std::size_t>(r)].push_back(std::move(f));
          }
        });
    for (int r = 1; r < size; ++r) {
      ASSERT_EQ(results[static_cast<std::size_t>(r)].size(), sizes.size()) << "rank " << r;
      for (std::size_t k = 0; k < sizes.size(); ++k) {
        const auto& mine = results[static_cast<std::size_t>(r)][k];
        const auto& first = results[0][k];
        EXPECT_TRUE(mine.size() == first.size() &&
                    std::memcmp(mine.data(), first.data(), mine.size() * 4) == 0)
            << size << " ranks: rank " << r << " and rank 0 differ, " << sizes[k] << " elements";
      }
    }
  }
}

TEST(HierOnThreads, AllGatherAndReduceScatterKeepRankOrderWhenNodesHoldRanksInTurn) {
  for (const auto& [size, nodes] : {std::pair{4, 2}, std::pair{6, 2}, std::pair{6, 3}}) {
    const auto group = make_thread_group(size);
    test::on_ranks(group, [&, size = size, nodes = nodes](int r, std::shared_ptr<Bootstrap> bs) {
      CommunicatorOptions o;
      o.timeout = 20s;
      auto comm = runtime::create_communicator(bs, o, test::nodes_in_turn(nodes));
      for (Op op : {Op::kAllGather, Op::kReduceScatter}) {
        ASSERT_EQ(comm->plan().ops.at(op).table[0].backend, Backend::kHier) << to_string(op);
      }
      const auto w = static_cast<std::size_t>(size);
      for (std::size_t n : {1u, 7u, 1000u, 70001u}) {
        // All-gather: every rank's block in rank order, fp32 and bf16.
        std::vector<float> in(n), out(n * w, -1.0f);
        std::vector<std::uint16_t> in_h(n), out_h(n * w, 0xffff);
        for (std::size_t i = 0; i < n; ++i) {
          in[i] = value(r, i);
          in_h[i] = bf16_of_exact(in[i]);
        }
        comm->all_gather(in.data(), out.data(), n, DataType::kFloat32);
        comm->all_gather(in_h.data(), out_h.data(), n, DataType::kBFloat16);
        int wrong = 0;
        for (std::size_t q = 0; q < w; ++q) {
          for (std::size_t i = 0; i < n; ++i) {
            const float want = value(static_cast<int>(q), i);
            if (out[q * n + i] != want || out_h[q * n + i] != bf16_of_exact(want)) ++wrong;
          }
        }
        EXPECT_EQ(wrong, 0) << "all_gather, rank " << r << " of " << size << " on " << nodes
                            << " nodes, " << n << " elements each";
        // Reduce-scatter: block r of the reduction, sum and avg in fp32, max in bf16.
        std::vector<float> full(n * w), sum(n), avg(n);
        std::vector<std::uint16_t> full_h(n * w), max_h(n);
        for (std::size_t j = 0; j < n * w; ++j) {
          full[j] = value(r, j);
          full_h[j] = bf16_of_exact(full[j]);
        }
        comm->reduce_scatter(full.data(), sum.data(), n, DataType::kFloat32, ReduceOp::kSum);
        comm->reduce_scatter(full.data(), avg.data(), n, DataType::kFloat32, ReduceOp::kAvg);
        comm->reduce_scatter(full_h.data(), max_h.data(), n, DataType::kBFloat16, ReduceOp::kMax);
        wrong = 0;
        for (std::size_t i = 0; i < n; ++i) {
          const std::size_t j = static_cast<std::size_t>(r) * n + i;
          float want_sum = 0, want_max = value(0, j);
          for (int q = 0; q < size; ++q) {
            want_sum += value(q, j);
            want_max = std::max(want_max, value(q, j));
          }
          if (sum[i] != want_sum || avg[i] != want_sum / static_cast<float>(size) ||
              max_h[i] != bf16_of_exact(want_max)) {
            ++wrong;
          }
        }
        EXPECT_EQ(wrong, 0) << "reduce_scatter, rank " << r << " of " << size << " on " << nodes
                            << " nodes, " << n << " elements each";
      }
    });
  }
}

TEST(HierOnThreads, ARankThatNeverCallsIsATimeoutNamingIt) {
  const auto group = make_thread_group(4);
  std::vector<std::string> errors(4);
  test::on_ranks(group, [&](int r, std::shared_ptr<Bootstrap> bs) {
    CommunicatorOptions o;
    o.timeout = 1500ms;
    auto comm = runtime::create_communicator(bs, o, two_nodes());
    std::vector<float> data(4096, 1.0f);
    if (r != 3) {
      try {
        comm->all_reduce(data.data(), data.data(), data.size(), DataType::kFloat32, ReduceOp::kSum);
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kTimeout) << e.what();
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    }
    bs->barrier("test end", Deadline::after(30s));  // rank 3 keeps its communicator until then
  });
  for (int r = 0; r < 3; ++r) {
    const auto& e = errors[static_cast<std::size_t>(r)];
    EXPECT_NE(e.find("#1 via hier failed"), std::string::npos) << e;
    EXPECT_NE(e.find("rank 3 did not time out in call #1 as the others did"), std::string::npos)
        << e;
  }
}

}  // namespace
}  // namespace tpcomm

namespace tpcomm {
namespace {

// Communicator::abort() from another thread while a call waits in Gloo for a peer that has not
// come (docs/errors.md, "In a running group"): the call fails at once instead of at its deadline,
// and the peer that comes later fails too instead of completing a call its partner gave up on.
void abort_unblocks(const std::string& engine, const runtime::Platform& platform, int ranks) {
  std::vector<std::string> errors(static_cast<std::size_t>(ranks));
  std::vector<double> waited_s(static_cast<std::size_t>(ranks));
  const auto group = make_thread_group(ranks);
  test::on_ranks(group, [&](int r, std::shared_ptr<Bootstrap> bs) {
    CommunicatorOptions o;
    o.timeout = 20s;
    o.disabled = {Backend::kShm};
    auto comm = runtime::create_communicator(bs, o, platform);
    EXPECT_EQ(comm->plan().ops.at(Op::kAllReduce).table[0].backend,
              engine == "hier" ? Backend::kHier : Backend::kGloo);
    std::vector<float> data(4096, static_cast<float>(r + 1));
    const bool late = r == ranks - 1;
    if (late) std::this_thread::sleep_for(1500ms);  // its peers are blocked and aborted meanwhile
    std::thread aborter;
    if (r == 0) {
      aborter = std::thread([&] {
        std::this_thread::sleep_for(300ms);
        comm->abort("stop waiting");
      });
    }
    const auto start = std::chrono::steady_clock::now();
    try {
      comm->all_reduce(data.data(), data.data(), data.size(), DataType::kFloat32, ReduceOp::kSum);
    } catch (const Error& e) {
      errors[static_cast<std::size_t>(r)] = e.what();
    }
    waited_s[static_cast<std::size_t>(r)] =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (aborter.joinable()) aborter.join();
  });
  EXPECT_NE(errors[0].find("aborted"), std::string::npos) << errors[0];
  EXPECT_LT(waited_s[0], 10.0) << "the aborted call waited for its deadline (20 s)";
  for (int r = 1; r < ranks; ++r) {
    EXPECT_FALSE(errors[static_cast<std::size_t>(r)].empty())
        << "rank " << r << " completed a call rank 0 had given up on";
    EXPECT_LT(waited_s[static_cast<std::size_t>(r)], 10.0) << "rank " << r;
  }
}

TEST(AbortFromAnotherThread, UnblocksACallWaitingInGloo) {
  abort_unblocks("gloo", runtime::builtin_platform(), 2);
}

TEST(AbortFromAnotherThread, UnblocksACallWaitingInHiersGlooStage) {
  abort_unblocks("hier", two_nodes(), 4);
}

}  // namespace
}  // namespace tpcomm

namespace tpcomm {
namespace {

// hier's stages rendezvous through sub-bootstraps on the group's store; creating and destroying
// hier communicators must not grow the store (it left about 4 keys per communicator).
TEST(HierOnThreads, CreateDestroyCyclesLeaveNoStoreKeys) {
  TcpStoreServer server("127.0.0.1", 0);
  std::vector<std::shared_ptr<Bootstrap>> group;
  for (int r = 0; r < 4; ++r) {
    group.push_back(make_store_bootstrap(
        connect_tcp_store("127.0.0.1", server.port(), Deadline::after(5s)), r, 4));
  }
  auto cycle = [&](int cycles) {
    test::on_ranks(group, [&](int r, std::shared_ptr<Bootstrap> bs) {
      for (int i = 0; i < cycles; ++i) {
        CommunicatorOptions o;
        o.timeout = 20s;
        auto comm = runtime::create_communicator(bs, o, two_nodes());
        EXPECT_EQ(comm->plan().ops.at(Op::kAllReduce).table[0].backend, Backend::kHier);
        float x = static_cast<float>(r + 1);
        comm->all_reduce(&x, &x, 1, DataType::kFloat32, ReduceOp::kSum);
        EXPECT_EQ(x, 10.0f);
      }
    });
  };
  cycle(1);
  const std::size_t keys = server.key_count();
  cycle(5);
  EXPECT_EQ(server.key_count(), keys) << "store keys grew over 5 hier communicators";
}

}  // namespace
}  // namespace tpcomm
