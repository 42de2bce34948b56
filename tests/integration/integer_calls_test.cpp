// Integer calls (int32, int64, uint8) on every CPU backend: shm, Gloo (both sides of its opening
// exchange's inline room) and hier (two simulated nodes, ranks dealt in turn). Every element of
// every op is checked against a reference computed here in 64-bit unsigned arithmetic and
// truncated to the type (two's complement wrap-around), with values at the types' extremes so
// sums wrap; broadcast and all-gather must move them bit for bit. Avg is refused before a call
// starts, on every rank, and the communicator stays usable.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
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

constexpr DataType kIntegerTypes[] = {DataType::kInt32, DataType::kInt64, DataType::kUInt8};

// Element i of rank r's input, as 64 bits to be truncated to the type: every few elements one of
// the extremes (0x7f.., 0x80.., all ones), else a value that differs by rank and element.
std::uint64_t value(int r, std::size_t i, DataType t) {
  const unsigned bits = 8 * static_cast<unsigned>(size_of(t));
  const std::uint64_t top = std::uint64_t{1} << (bits - 1);
  switch ((i + static_cast<std::size_t>(r)) % 7) {
    case 0:
      return top - 1 - static_cast<std::uint64_t>(r);
    case 1:
      return top + static_cast<std::uint64_t>(r);
    case 2:
      return ~std::uint64_t{0};
    default:
      return (i * 2654435761u + static_cast<std::uint64_t>(r) * 40503u) ^ (i << 17);
  }
}

// As a signed (int32, int64) or unsigned (uint8) value of the type, for max and min.
std::int64_t as_typed(std::uint64_t v, DataType t) {
  switch (t) {
    case DataType::kInt32:
      return static_cast<std::int32_t>(static_cast<std::uint32_t>(v));
    case DataType::kInt64:
      return static_cast<std::int64_t>(v);
    default:
      return static_cast<std::uint8_t>(v);
  }
}

std::uint64_t truncated(std::uint64_t v, DataType t) {
  const unsigned bits = 8 * static_cast<unsigned>(size_of(t));
  return bits == 64 ? v : v & ((std::uint64_t{1} << bits) - 1);
}

std::uint64_t reduced(int w, std::size_t i, DataType t, ReduceOp op) {
  std::uint64_t sum = 0;
  std::int64_t best = as_typed(value(0, i, t), t);
  for (int r = 0; r < w; ++r) {
    sum += value(r, i, t);
    const std::int64_t v = as_typed(value(r, i, t), t);
    if (op == ReduceOp::kMax && v > best) best = v;
    if (op == ReduceOp::kMin && v < best) best = v;
  }
  return truncated(op == ReduceOp::kSum ? sum : static_cast<std::uint64_t>(best), t);
}

std::vector<std::uint8_t> encode(int r, std::size_t n, DataType t) {
  const std::size_t es = size_of(t);
  std::vector<std::uint8_t> out(n * es);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t v = value(r, i, t);
    std::memcpy(out.data() + i * es, &v, es);  // little-endian: the low bytes
  }
  return out;
}

std::uint64_t element(const std::vector<std::uint8_t>& b, std::size_t i, DataType t) {
  std::uint64_t v = 0;
  std::memcpy(&v, b.data() + i * size_of(t), size_of(t));
  return v;
}

// Counts wrong elements; the first one's place is written only when it is wrong (`where` is a
// callable returning it: formatting it for every element cost most of the test's time).
struct Wrong {
  int count = 0;
  std::string first;
  template <typename Where>
  void check(std::uint64_t got, std::uint64_t want, const Where& where) {
    if (got == want) return;
    if (count++ == 0) first = fmt::format("{}: got {:#x}, want {:#x}", where(), got, want);
  }
};

// Every op of every integer type on `comm`, for each count in `counts`.
void check_every_call(Communicator& comm, const std::vector<std::size_t>& counts) {
  const int w = comm.size();
  const int me = comm.rank();
  const auto uw = static_cast<std::size_t>(w);
  for (DataType t : kIntegerTypes) {
    const std::size_t es = size_of(t);
    for (std::size_t n : counts) {
      const std::string tag = fmt::format("W={} {} n={}", w, to_string(t), n);
      Wrong wrong;
      const auto full = encode(me, n * uw, t);
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin}) {
        std::vector<std::uint8_t> out(n * es, 0xa5);
        comm.all_reduce(full.data(), out.data(), n, t, op);
        for (std::size_t i = 0; i < n; ++i) {
          wrong.check(element(out, i, t), reduced(w, i, t, op), [&] {
            return fmt::format("all_reduce {} {} element {}", tag, to_string(op), i);
          });
        }
        std::vector<std::uint8_t> in_place(full.begin(), full.begin() + static_cast<long>(n * es));
        comm.all_reduce(in_place.data(), in_place.data(), n, t, op);
        for (std::size_t i = 0; i < n; ++i) {
          wrong.check(element(in_place, i, t), reduced(w, i, t, op), [&] {
            return fmt::format("in-place all_reduce {} {} element {}", tag, to_string(op), i);
          });
        }
        comm.reduce_scatter(full.data(), out.data(), n, t, op);
        for (std::size_t i = 0; i < n; ++i) {
          const std::size_t at = static_cast<std::size_t>(me) * n + i;
          wrong.check(element(out, i, t), reduced(w, at, t, op), [&] {
            return fmt::format("reduce_scatter {} {} element {}", tag, to_string(op), i);
          });
        }
      }
      std::vector<std::uint8_t> gathered(n * es * uw, 0xa5);
      comm.all_gather(full.data(), gathered.data(), n, t);
      for (std::size_t r = 0; r < uw; ++r) {
        for (std::size_t i = 0; i < n; ++i) {
          wrong.check(element(gathered, r * n + i, t),
                      truncated(value(static_cast<int>(r), i, t), t),
                      [&] { return fmt::format("all_gather {} block {} element {}", tag, r, i); });
        }
      }
      std::vector<std::uint8_t> b(full.begin(), full.begin() + static_cast<long>(n * es));
      comm.broadcast(b.data(), n, t, w - 1);
      for (std::size_t i = 0; i < n; ++i) {
        wrong.check(element(b, i, t), truncated(value(w - 1, i, t), t),
                    [&] { return fmt::format("broadcast {} element {}", tag, i); });
      }
      EXPECT_EQ(wrong.count, 0) << "rank " << me << ": " << wrong.first;
    }
  }
}

TEST(IntegerCalls, EveryElementOverShm) {
  for (int w : {2, 3}) {
    test::on_ranks(make_thread_group(w), [&](int, std::shared_ptr<Bootstrap> bs) {
      CommunicatorOptions o;
      o.timeout = 60s;
      auto comm = Communicator::create(bs, o);
      ASSERT_EQ(comm->plan().ops.at(Op::kAllReduce).table.front().backend, Backend::kShm);
      check_every_call(*comm, {0, 1, 7, 1000, 300001});
    });
  }
}

TEST(IntegerCalls, EveryElementOverGlooOnBothSidesOfTheInlineRoom) {
  for (int w : {2, 3}) {
    const std::size_t room = transport::gloo_inline_room(w);
    test::on_ranks(make_thread_group(w), [&](int, std::shared_ptr<Bootstrap> bs) {
      CommunicatorOptions o;
      o.disabled = {Backend::kShm};  // Gloo carries every call
      o.timeout = 60s;
      auto comm = Communicator::create(bs, o);
      ASSERT_EQ(comm->plan().ops.at(Op::kAllReduce).table.front().backend, Backend::kGloo);
      // Counts of int64 at the room, one above, and far above; the other types fit more.
      check_every_call(*comm, {1, room / 8, room / 8 + 1, room, room + 1, 70001});
    });
  }
}

TEST(IntegerCalls, EveryElementOverHierWithRanksDealtToNodesInTurn) {
  test::on_ranks(make_thread_group(4), [&](int, std::shared_ptr<Bootstrap> bs) {
    CommunicatorOptions o;
    o.timeout = 60s;
    auto comm = runtime::create_communicator(bs, o, test::nodes_in_turn(2));
    ASSERT_EQ(comm->plan().ops.at(Op::kAllReduce).table.front().backend, Backend::kHier);
    check_every_call(*comm, {1, 7, 1001, 70001});
  });
}

TEST(IntegerCalls, AvgIsRefusedBeforeTheCallAndTheCommunicatorStaysUsable) {
  test::on_ranks(make_thread_group(2), [&](int me, std::shared_ptr<Bootstrap> bs) {
    CommunicatorOptions o;
    o.timeout = 20s;
    auto comm = Communicator::create(bs, o);
    for (DataType t : kIntegerTypes) {
      std::vector<std::uint8_t> buf(16 * size_of(t) * 2);
      for (bool scatter : {false, true}) {
        try {
          if (scatter) {
            comm->reduce_scatter(buf.data(), buf.data(), 16, t, ReduceOp::kAvg);
          } else {
            comm->all_reduce(buf.data(), buf.data(), 16, t, ReduceOp::kAvg);
          }
          ADD_FAILURE() << "avg of " << to_string(t) << " was accepted";
        } catch (const Error& e) {
          EXPECT_EQ(e.code(), ErrorCode::kInvalidInput);
          EXPECT_NE(std::string(e.what()).find("avg is for floating-point types"),
                    std::string::npos)
              << e.what();
        }
      }
    }
    EXPECT_FALSE(comm->aborted());
    std::int64_t x = me + 40;
    comm->all_reduce(&x, &x, 1, DataType::kInt64, ReduceOp::kSum);
    EXPECT_EQ(x, 81);
  });
}

}  // namespace
}  // namespace tpcomm
