// Gloo's calls on both sides of the opening exchange's inline room (gloo_opening_exchange.hpp):
// a call whose data fits travels with the identities and is combined on each rank; one element
// more takes Gloo's collective (the ring reduce-scatter for reduce-scatter). Both must give every
// element, for every type and op, in groups whose room differs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "support/reference_float.hpp"
#include "thread_ranks.hpp"
#include "tpcomm/communicator.hpp"
#include "transport/gloo/gloo_opening_exchange.hpp"

namespace tpcomm {
namespace {

using test::on_ranks;

// Small integers, different on every rank and element: exact in every type and in their sums,
// so the reference is exact too (avg: one fp32 division, then one rounding, as the contract says).
float value(int rank, std::size_t i) {
  return static_cast<float>((rank + 1) * 8 + static_cast<int>(i % 13) - 6);
}

std::vector<std::uint8_t> encode(const std::vector<float>& v, DataType t) {
  std::vector<std::uint8_t> out(v.size() * size_of(t));
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (t == DataType::kFloat32) {
      std::memcpy(out.data() + 4 * i, &v[i], 4);
    } else {
      const std::uint16_t h =
          t == DataType::kBFloat16 ? test::float_to_bf16(v[i]) : test::float_to_fp16(v[i]);
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
  }
  return out;
}

float decoded(const std::vector<std::uint8_t>& b, DataType t, std::size_t i) {
  if (t == DataType::kFloat32) {
    float f;
    std::memcpy(&f, b.data() + 4 * i, 4);
    return f;
  }
  std::uint16_t h;
  std::memcpy(&h, b.data() + 2 * i, 2);
  return t == DataType::kBFloat16 ? test::float_from_bf16(h) : test::float_from_fp16(h);
}

// The reduction of element i over `w` ranks, rounded to `t` as the library rounds it.
float reference(int w, ReduceOp op, DataType t, const std::function<float(int)>& of_rank) {
  float r = of_rank(0);
  for (int k = 1; k < w; ++k) {
    const float x = of_rank(k);
    r = op == ReduceOp::kMax ? std::max(r, x) : r + x;
  }
  if (op == ReduceOp::kAvg) r /= static_cast<float>(w);
  return decoded(encode({r}, t), t, 0);
}

// Counts the first few wrong elements into `what`.
struct Wrong {
  int count = 0;
  std::string first;
  void check(float got, float want, const std::string& where) {
    if (got == want) return;
    if (count++ == 0)
      first = where + ": got " + std::to_string(got) + ", want " + std::to_string(want);
  }
};

TEST(GlooCalls, EveryElementOnBothSidesOfTheInlineRoom) {
  for (int w : {2, 3, 5}) {
    const std::size_t room = transport::gloo_inline_room(w);
    on_ranks(make_thread_group(w), [&](int me, std::shared_ptr<Bootstrap> bs) {
      CommunicatorOptions o;
      o.disabled = {Backend::kShm};  // Gloo carries every call
      o.timeout = std::chrono::milliseconds(60000);
      auto comm = Communicator::create(bs, o);
      ASSERT_EQ(comm->plan().ops.at(Op::kAllReduce).table.front().backend, Backend::kGloo);
      for (DataType t : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16}) {
        const std::size_t at_room = room / size_of(t);
        for (std::size_t n : {at_room - 1, at_room, at_room + 1}) {
          const std::string tag = fmt::format("W={} {} n={} (room {} B)", w, to_string(t), n, room);
          Wrong wrong;
          std::vector<float> mine(n * static_cast<std::size_t>(w));
          for (std::size_t i = 0; i < mine.size(); ++i) mine[i] = value(me, i);
          const auto full = encode(mine, t);
          for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kAvg}) {
            std::vector<std::uint8_t> out(n * size_of(t));
            comm->all_reduce(full.data(), out.data(), n, t, op);
            for (std::size_t i = 0; i < n; ++i) {
              wrong.check(decoded(out, t, i),
                          reference(w, op, t, [&](int r) { return value(r, i); }),
                          fmt::format("all_reduce {} {} element {}", tag, to_string(op), i));
            }
            comm->reduce_scatter(full.data(), out.data(), n, t, op);
            for (std::size_t i = 0; i < n; ++i) {
              const std::size_t at = static_cast<std::size_t>(me) * n + i;
              wrong.check(decoded(out, t, i),
                          reference(w, op, t, [&](int r) { return value(r, at); }),
                          fmt::format("reduce_scatter {} {} element {}", tag, to_string(op), i));
            }
          }
          std::vector<std::uint8_t> gathered(full.size());
          comm->all_gather(full.data(), gathered.data(), n, t);
          for (int r = 0; r < w; ++r) {
            for (std::size_t i = 0; i < n; ++i) {
              wrong.check(decoded(gathered, t, static_cast<std::size_t>(r) * n + i),
                          decoded(encode({value(r, i)}, t), t, 0),
                          fmt::format("all_gather {} block {} element {}", tag, r, i));
            }
          }
          EXPECT_EQ(wrong.count, 0) << "rank " << me << ": " << wrong.first;
        }
      }
    });
  }
}

}  // namespace
}  // namespace tpcomm
