// all_to_all, all_to_allv, all_gatherv, reduce_scatterv, gather, scatter and reduce on every CPU
// route: shm, Gloo (both sides of its opening exchange's inline room) and hier's stages over
// simulated nodes (the built-in table's routes, and hier at every size). W = 2, 3 and 4; float32,
// bfloat16 and int64. Every element is checked against values computed here from (sender, receiver,
// element); uneven all_to_allv splits include zeros and blocks longer than a lane step. Bad inputs
// are refused on every rank alike: mismatched counts, roots and ops, a root out of range, counts of
// the wrong length.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "runtime/communicator_state.hpp"
#include "simulated_nodes.hpp"
#include "thread_ranks.hpp"
#include "tpcomm/error.hpp"
#include "transport/gloo/gloo_opening_exchange.hpp"

namespace tpcomm {
namespace {

using namespace std::chrono_literals;

constexpr DataType kTypes[] = {DataType::kFloat32, DataType::kBFloat16, DataType::kInt64};

// The bits of element i of what rank `from` sends rank `to`: distinct for every (from, to, i)
// in the type's width, so a block in the wrong place or a shifted element shows.
std::uint64_t bits(int from, int to, std::size_t i, DataType t) {
  const std::uint64_t v = (static_cast<std::uint64_t>(from) * 131 +
                           static_cast<std::uint64_t>(to) * 17 + i * 2654435761u) ^
                          (i >> 7);
  return size_of(t) == 8 ? v * 0x9e3779b97f4a7c15ULL : v & ((1ULL << (8 * size_of(t))) - 1);
}

void put(std::vector<std::uint8_t>& b, std::size_t at, std::uint64_t v, DataType t) {
  std::memcpy(b.data() + at * size_of(t), &v, size_of(t));
}
std::uint64_t get(const std::vector<std::uint8_t>& b, std::size_t at, DataType t) {
  std::uint64_t v = 0;
  std::memcpy(&v, b.data() + at * size_of(t), size_of(t));
  return v;
}

// A small integer as the type's bits: exact in bfloat16 and float32 (sums stay below 256).
std::uint64_t small(std::int64_t v, DataType t) {
  if (t == DataType::kInt64) return static_cast<std::uint64_t>(v);
  const float f = static_cast<float>(v);
  std::uint32_t u = 0;
  std::memcpy(&u, &f, 4);
  return t == DataType::kBFloat16 ? u >> 16 : u;
}
std::int64_t input_value(int r, std::size_t i) {
  return static_cast<std::int64_t>((static_cast<std::size_t>(r) * 5 + i) % 11) - 3;
}

struct Wrong {
  int count = 0;
  std::string first;
  template <typename Where>
  void check(std::uint64_t got, std::uint64_t want, const Where& where) {
    if (got == want) return;
    if (count++ == 0) first = fmt::format("{}: got {:#x}, want {:#x}", where(), got, want);
  }
};

// Rank s's count for rank d in all_to_allv round `round`: uneven, some zero, some longer than a
// step of the lane.
std::size_t split(int s, int d, int round) {
  static const std::size_t sizes[] = {0, 1, 7, 1000, 0, 70001, 3};
  return sizes[static_cast<std::size_t>(s * 3 + d * 5 + round) % 7];
}

void check_all_to_all(Communicator& comm, DataType t, std::size_t n, Wrong& wrong) {
  const int w = comm.size();
  const int me = comm.rank();
  const auto uw = static_cast<std::size_t>(w);
  std::vector<std::uint8_t> in(n * uw * size_of(t)), out(in.size(), 0xa5);
  for (int d = 0; d < w; ++d) {
    for (std::size_t i = 0; i < n; ++i)
      put(in, static_cast<std::size_t>(d) * n + i, bits(me, d, i, t), t);
  }
  comm.all_to_all(in.data(), out.data(), n, t);
  for (int s = 0; s < w; ++s) {
    for (std::size_t i = 0; i < n; ++i) {
      wrong.check(get(out, static_cast<std::size_t>(s) * n + i, t), bits(s, me, i, t), [&] {
        return fmt::format("all_to_all {} n={} from rank {} element {}", to_string(t), n, s, i);
      });
    }
  }
}

void check_all_to_allv(Communicator& comm, DataType t, int round, Wrong& wrong) {
  const int w = comm.size();
  const int me = comm.rank();
  std::vector<std::size_t> sends, receives;
  for (int r = 0; r < w; ++r) {
    sends.push_back(split(me, r, round));
    receives.push_back(split(r, me, round));
  }
  std::size_t total_in = 0, total_out = 0;
  for (int r = 0; r < w; ++r) total_in += sends[static_cast<std::size_t>(r)];
  for (int r = 0; r < w; ++r) total_out += receives[static_cast<std::size_t>(r)];
  std::vector<std::uint8_t> in(total_in * size_of(t)), out(total_out * size_of(t), 0xa5);
  std::size_t at = 0;
  for (int d = 0; d < w; ++d) {
    for (std::size_t i = 0; i < sends[static_cast<std::size_t>(d)]; ++i)
      put(in, at++, bits(me, d, i, t), t);
  }
  comm.all_to_allv(in.data(), sends, out.data(), receives, t);
  at = 0;
  for (int s = 0; s < w; ++s) {
    for (std::size_t i = 0; i < receives[static_cast<std::size_t>(s)]; ++i, ++at) {
      wrong.check(get(out, at, t), bits(s, me, i, t), [&] {
        return fmt::format("all_to_allv {} round {} from rank {} element {}", to_string(t), round,
                           s, i);
      });
    }
  }
}

// all_gatherv and reduce_scatterv with rank r's block split(r, 0, round) long (the same counts
// on every rank).
void check_per_rank(Communicator& comm, DataType t, int round, Wrong& wrong) {
  const int w = comm.size();
  const int me = comm.rank();
  std::vector<std::size_t> counts, at{0};
  for (int r = 0; r < w; ++r) {
    counts.push_back(split(r, 0, round));
    at.push_back(at.back() + counts.back());
  }
  const std::size_t total = at.back();
  const auto um = static_cast<std::size_t>(me);
  std::vector<std::uint8_t> mine(counts[um] * size_of(t)), all(total * size_of(t), 0xa5);
  for (std::size_t i = 0; i < counts[um]; ++i) put(mine, i, bits(me, 0, i, t), t);
  comm.all_gatherv(mine.data(), all.data(), counts, t);
  for (int r = 0; r < w; ++r) {
    const auto ur = static_cast<std::size_t>(r);
    for (std::size_t i = 0; i < counts[ur]; ++i) {
      wrong.check(get(all, at[ur] + i, t), bits(r, 0, i, t), [&] {
        return fmt::format("all_gatherv {} round {} block {} element {}", to_string(t), round, r,
                           i);
      });
    }
  }
  std::vector<std::uint8_t> whole(total * size_of(t)), part(counts[um] * size_of(t), 0xa5);
  for (std::size_t i = 0; i < total; ++i) put(whole, i, small(input_value(me, i), t), t);
  comm.reduce_scatterv(whole.data(), part.data(), counts, t, ReduceOp::kSum);
  for (std::size_t i = 0; i < counts[um]; ++i) {
    std::int64_t want = 0;
    for (int r = 0; r < w; ++r) want += input_value(r, at[um] + i);
    wrong.check(get(part, i, t), small(want, t), [&] {
      return fmt::format("reduce_scatterv {} round {} element {}", to_string(t), round, i);
    });
  }
}

void check_rooted(Communicator& comm, DataType t, std::size_t n, int root, Wrong& wrong) {
  const int w = comm.size();
  const int me = comm.rank();
  const auto uw = static_cast<std::size_t>(w);
  const bool is_root = me == root;
  const std::size_t es = size_of(t);
  const auto tag = [&](const char* op) {
    return fmt::format("{} {} n={} root {}", op, to_string(t), n, root);
  };
  // gather: off the root no output at all (null).
  std::vector<std::uint8_t> mine(n * es), all(is_root ? n * uw * es : 0, 0xa5);
  for (std::size_t i = 0; i < n; ++i) put(mine, i, bits(me, root, i, t), t);
  comm.gather(mine.data(), is_root ? all.data() : nullptr, n, t, root);
  for (std::size_t r = 0; is_root && r < uw; ++r) {
    for (std::size_t i = 0; i < n; ++i) {
      wrong.check(get(all, r * n + i, t), bits(static_cast<int>(r), root, i, t),
                  [&] { return fmt::format("{} block {} element {}", tag("gather"), r, i); });
    }
  }
  // scatter: the root's input, block r for rank r; off the root no input (null).
  std::vector<std::uint8_t> whole(is_root ? n * uw * es : 0), part(n * es, 0xa5);
  for (std::size_t r = 0; is_root && r < uw; ++r) {
    for (std::size_t i = 0; i < n; ++i)
      put(whole, r * n + i, bits(root, static_cast<int>(r), i, t), t);
  }
  comm.scatter(is_root ? whole.data() : nullptr, part.data(), n, t, root);
  for (std::size_t i = 0; i < n; ++i) {
    wrong.check(get(part, i, t), bits(root, me, i, t),
                [&] { return fmt::format("{} element {}", tag("scatter"), i); });
  }
  // reduce: sum and max of small integers (exact in every type), in place on the root.
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
    std::vector<std::uint8_t> buf(n * es);
    for (std::size_t i = 0; i < n; ++i) put(buf, i, small(input_value(me, i), t), t);
    comm.reduce(buf.data(), is_root ? buf.data() : nullptr, n, t, op, root);
    for (std::size_t i = 0; is_root && i < n; ++i) {
      std::int64_t want = op == ReduceOp::kSum ? 0 : input_value(0, i);
      for (int r = 0; r < w; ++r) {
        want = op == ReduceOp::kSum ? want + input_value(r, i) : std::max(want, input_value(r, i));
      }
      wrong.check(get(buf, i, t), small(want, t),
                  [&] { return fmt::format("{} {} element {}", tag("reduce"), to_string(op), i); });
    }
  }
}

void check_every_call(Communicator& comm, const std::vector<std::size_t>& counts) {
  for (DataType t : kTypes) {
    Wrong wrong;
    for (std::size_t n : counts) {
      check_all_to_all(comm, t, n, wrong);
      for (int root = 0; root < comm.size(); ++root) check_rooted(comm, t, n, root, wrong);
    }
    for (int round = 0; round < 3; ++round) {
      check_all_to_allv(comm, t, round, wrong);
      check_per_rank(comm, t, round, wrong);
    }
    EXPECT_EQ(wrong.count, 0) << "rank " << comm.rank() << " of " << comm.size() << ": "
                              << wrong.first;
  }
}

TEST(ExchangeCalls, EveryElementOverShm) {
  for (int w : {2, 3, 4}) {
    test::on_ranks(make_thread_group(w), [&](int, std::shared_ptr<Bootstrap> bs) {
      CommunicatorOptions o;
      o.timeout = 60s;
      auto comm = Communicator::create(bs, o);
      for (Op op : {Op::kAllToAll, Op::kGather, Op::kScatter, Op::kReduce}) {
        ASSERT_EQ(comm->plan().ops.at(op).table.front().backend, Backend::kShm) << to_string(op);
      }
      check_every_call(*comm, {0, 1, 7, 1000, 70001});
      // The calls were counted where they ran.
      bool all_to_allv_on_shm = false;
      for (const auto& s : comm->stats()) {
        if (s.collective == Collective::kAllToAllv) all_to_allv_on_shm = s.backend == Backend::kShm;
      }
      EXPECT_TRUE(all_to_allv_on_shm);
    });
  }
}

TEST(ExchangeCalls, EveryElementOverGlooOnBothSidesOfTheInlineRoom) {
  for (int w : {2, 3, 4}) {
    const std::size_t room = transport::gloo_inline_room(w);
    test::on_ranks(make_thread_group(w), [&](int, std::shared_ptr<Bootstrap> bs) {
      CommunicatorOptions o;
      o.disabled = {Backend::kShm};
      o.timeout = 60s;
      auto comm = Communicator::create(bs, o);
      ASSERT_EQ(comm->plan().ops.at(Op::kAllToAll).table.front().backend, Backend::kGloo);
      check_every_call(*comm, {0, 1, room / 8, room / 8 + 1, 20001});
    });
  }
}

TEST(ExchangeCalls, AcrossSimulatedNodesTheBuiltInTableStagesThemOnHier) {
  test::on_ranks(make_thread_group(4), [&](int, std::shared_ptr<Bootstrap> bs) {
    CommunicatorOptions o;
    o.timeout = 60s;
    auto comm = runtime::create_communicator(bs, o, test::nodes_in_turn(2));
    for (Op op : {Op::kAllReduce, Op::kAllToAll, Op::kGather, Op::kScatter, Op::kReduce}) {
      EXPECT_EQ(comm->plan().ops.at(op).table.front().backend, Backend::kHier) << to_string(op);
    }
    // Messages go over Gloo's pairs, the plan saying why not hier.
    const OpPlan& messages = comm->plan().ops.at(Op::kSendRecv);
    EXPECT_EQ(messages.table.front().backend, Backend::kGloo);
    ASSERT_TRUE(messages.rejected.count(Backend::kHier));
    EXPECT_NE(messages.rejected.at(Backend::kHier).find("gloo's direct pairs"), std::string::npos);
    check_every_call(*comm, {0, 1, 1001, 70001});  // int64 x 70001 from 4 ranks: above 1 MiB
    std::map<Collective, std::set<std::string>> routes;
    for (const auto& s : comm->stats())
      routes[s.collective].insert(std::string(to_string(*s.backend)));
    // Above 1 MiB all_to_all, gather and scatter go to Gloo (the built-in rows).
    for (Collective op : {Collective::kAllToAll, Collective::kGather, Collective::kScatter}) {
      EXPECT_EQ(routes[op], (std::set<std::string>{"gloo", "hier"})) << to_string(op);
    }
    // all_to_allv is routed by the table's last row (its ranks' sizes differ): Gloo's here.
    EXPECT_EQ(routes[Collective::kAllToAllv], (std::set<std::string>{"gloo"}));
    for (Collective op :
         {Collective::kReduce, Collective::kAllGatherv, Collective::kReduceScatterv}) {
      EXPECT_EQ(routes[op], (std::set<std::string>{"hier"})) << to_string(op);
    }
  });
}

// Every op on hier at every size (a tuning file), so all_to_allv runs hier's stages too. Two
// nodes of two ranks and three nodes of two ranks, dealt in turn (hier needs two ranks on some
// node).
std::string hier_everywhere(int world) {
  std::string ops;
  for (const char* op : {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "gather",
                         "scatter", "reduce"}) {
    ops += fmt::format(R"({}"{}": [{{"max_bytes": null, "use": [{{"backend": "hier"}}]}}])",
                       ops.empty() ? "" : ", ", op);
  }
  return fmt::format(
      R"({{"tpcomm_tuning": 1, "entries": [{{"device": "cpu", "world_size": {}, "ops": {{{}}}}}]}})",
      world, ops);
}

TEST(ExchangeCalls, EveryElementThroughHiersStagesAtEverySize) {
  for (int nodes : {2, 3}) {
    const int w = 2 * nodes;
    const test::TempFile tuning(hier_everywhere(w));
    const test::ScopedEnv env("TPCOMM_TUNING", tuning.path().c_str());
    test::on_ranks(make_thread_group(w), [&](int, std::shared_ptr<Bootstrap> bs) {
      CommunicatorOptions o;
      o.timeout = 60s;
      auto comm = runtime::create_communicator(bs, o, test::nodes_in_turn(nodes));
      check_every_call(*comm, {0, 1, 1001, 70001});
      for (const auto& s : comm->stats()) {
        if (s.collective != Collective::kSend && s.collective != Collective::kRecv) {
          EXPECT_EQ(s.backend, Backend::kHier) << to_string(s.collective);
        }
      }
    });
  }
}

// Every rank's error of a call that `bad` makes wrong on one rank: all must fail.
// `route`: "shm" or "gloo" (shm disabled), 3 ranks; or "hier": 4 ranks on two simulated nodes,
// hier at every size.
template <typename Call>
void expect_refused_everywhere(const std::string& route, const std::string& expected, Call call) {
  const bool hier = route == "hier";
  const test::TempFile tuning(hier_everywhere(4));
  const test::ScopedEnv env("TPCOMM_TUNING", hier ? tuning.path().c_str() : "");
  const auto errors = test::errors_on_ranks(make_thread_group(hier ? 4 : 3), [&](int r, auto bs) {
    CommunicatorOptions o;
    o.timeout = 20s;
    if (route == "gloo") o.disabled = {Backend::kShm};
    auto comm = hier ? runtime::create_communicator(bs, o, test::nodes_in_turn(2))
                     : Communicator::create(bs, o);
    ASSERT_EQ(comm->plan().ops.at(Op::kAllToAll).table.front().backend, hier ? Backend::kHier
                                                                        : route == "gloo"
                                                                            ? Backend::kGloo
                                                                            : Backend::kShm);
    call(*comm, r);
    // A rank whose share of a hier call ends early (a gather's ranks off the root's lane, after
    // the node stage) learns of the mismatch at its next call.
    comm->barrier();
  });
  for (std::size_t r = 0; r < errors.size(); ++r) {
    EXPECT_NE(errors[r].find(expected), std::string::npos)
        << route << " rank " << r << ": " << errors[r];
  }
}

TEST(ExchangeCalls, MismatchedCountsRootsAndOpsFailOnEveryRank) {
  for (const char* route : {"shm", "gloo", "hier"}) {
    expect_refused_everywhere(route, "called all_gatherv", [](Communicator& c, int r) {
      const auto w = static_cast<std::size_t>(c.size());
      std::vector<std::size_t> counts(w, 4);
      if (r == 1) counts[0] = 3;
      std::vector<float> in(4), out(4 * w);
      c.all_gatherv(in.data(), out.data(), counts, DataType::kFloat32);
    });
    // Rank 1 expects 5 elements from rank 0, which sends it 4.
    expect_refused_everywhere(
        route, "rank 0 sends 4 elements to rank 1, which expects 5", [](Communicator& c, int r) {
          const auto w = static_cast<std::size_t>(c.size());
          std::vector<std::size_t> sends(w, 4), receives(w, 4);
          if (r == 1) receives[0] = 5;
          std::vector<float> in(4 * w), out(4 * w + 1);
          c.all_to_allv(in.data(), sends, out.data(), receives, DataType::kFloat32);
        });
    expect_refused_everywhere(route, "root", [](Communicator& c, int r) {
      std::vector<float> in(4), out(4 * static_cast<std::size_t>(c.size()));
      c.gather(in.data(), out.data(), 4, DataType::kFloat32, r == 2 ? 1 : 0);
    });
    expect_refused_everywhere(route, "called", [](Communicator& c, int r) {
      std::vector<float> in(4 * static_cast<std::size_t>(c.size())), out(in.size());
      if (r == 0) {
        c.scatter(in.data(), out.data(), 4, DataType::kFloat32, 0);
      } else {
        c.all_to_all(in.data(), out.data(), 4, DataType::kFloat32);
      }
    });
  }
}

TEST(ExchangeCalls, BadArgumentsAreRefusedBeforeAnythingMoves) {
  test::on_ranks(make_thread_group(2), [&](int, std::shared_ptr<Bootstrap> bs) {
    CommunicatorOptions o;
    o.timeout = 20s;
    auto comm = Communicator::create(bs, o);
    std::vector<float> buf(8);
    try {
      comm->gather(buf.data(), buf.data(), 2, DataType::kFloat32, 2);
      ADD_FAILURE() << "root 2 of 2 ranks accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("root 2 is not a rank of this group of 2"),
                std::string::npos)
          << e.what();
    }
  });
  test::on_ranks(make_thread_group(2), [&](int, std::shared_ptr<Bootstrap> bs) {
    auto comm = Communicator::create(bs);
    std::vector<float> buf(8);
    try {
      comm->all_to_allv(buf.data(), {1, 1, 1}, buf.data() + 4, {1, 1}, DataType::kFloat32);
      ADD_FAILURE() << "3 send counts for 2 ranks accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("3 send counts for a group of 2"), std::string::npos)
          << e.what();
    }
    try {
      comm->all_to_all(buf.data(), buf.data() + 1, 2, DataType::kFloat32);
      ADD_FAILURE() << "overlapping all_to_all accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("none (every block moves)"), std::string::npos)
          << e.what();
    }
  });
}

}  // namespace
}  // namespace tpcomm
