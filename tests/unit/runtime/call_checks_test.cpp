// The buffer checks every call passes before it is numbered (src/runtime/call_checks.hpp): the
// exact in-place forms and disjoint buffers pass, any other overlap is refused, and so are byte
// sizes that do not fit in size_t and buffers that run past the end of the address space. The
// function only compares addresses, so the buffers here are addresses in one array (and, for the
// address-space end, made-up ones), never read.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

#include "runtime/call_checks.hpp"
#include "tpcomm/error.hpp"

namespace tpcomm::runtime {
namespace {

constexpr std::size_t kMax = std::numeric_limits<std::size_t>::max();
constexpr DataType kTypes[] = {DataType::kFloat32, DataType::kBFloat16, DataType::kInt64,
                               DataType::kUInt8};
constexpr Op kOps[] = {Op::kAllReduce, Op::kAllGather, Op::kReduceScatter};

// Room for the largest call below: 3 ranks x 8 elements x 8 bytes, twice, plus margins.
alignas(64) std::byte arena[1024];
std::byte* const base = arena + 256;

transport::Call call_at(Op op, const void* input, void* output, std::size_t count, DataType type) {
  transport::Call c;
  c.op = op;
  c.input = input;
  c.output = output;
  c.count = count;
  c.type = type;
  return c;
}

// The error check_call_buffers throws (empty when it accepts the call).
std::string refusal(const transport::Call& c, int rank, int size) {
  try {
    check_call_buffers(c, rank, size);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidInput) << e.what();
    return e.what();
  }
  return "";
}

std::string describe(Op op, DataType t, int rank, long shift) {
  return std::string(to_string(op)) + " " + std::string(to_string(t)) + " rank " +
         std::to_string(rank) + " shift " + std::to_string(shift);
}

// Input and output of `op` (count elements of `t` per rank, on rank `rank`) placed in the
// op's in-place form, then the input moved by `shift` bytes.
transport::Call in_place_shifted(Op op, DataType t, std::size_t count, int rank, long shift) {
  const std::size_t block = count * size_of(t);
  std::byte* whole = base;  // the buffer of size x block bytes
  std::byte* mine = whole + static_cast<std::size_t>(rank) * block;
  switch (op) {
    case Op::kAllReduce:
      return call_at(op, whole + shift, whole, count, t);
    case Op::kAllGather:
      return call_at(op, mine + shift, whole, count, t);
    case Op::kReduceScatter:
      return call_at(op, whole + shift, mine, count, t);
    default:  // the rooted forms: rooted_in_place_shifted
      break;
  }
  return {};
}

TEST(CallChecks, ExactInPlaceFormsAreAllowed) {
  for (Op op : kOps) {
    for (DataType t : kTypes) {
      for (int size : {1, 2, 3}) {
        for (int rank = 0; rank < size; ++rank) {
          EXPECT_EQ(refusal(in_place_shifted(op, t, 8, rank, 0), rank, size), "")
              << describe(op, t, rank, 0);
        }
      }
    }
  }
}

TEST(CallChecks, OverlapsByOneElementOnEitherSideOfTheInPlaceFormAreRefused) {
  for (Op op : kOps) {
    for (DataType t : kTypes) {
      const long es = static_cast<long>(size_of(t));
      for (int rank = 0; rank < 3; ++rank) {
        for (long shift : {-es, es}) {
          const std::string why = refusal(in_place_shifted(op, t, 8, rank, shift), rank, 3);
          EXPECT_NE(why.find("overlap"), std::string::npos) << describe(op, t, rank, shift) << why;
        }
      }
    }
  }
}

TEST(CallChecks, OverlapsByOneElementAtEitherEndAreRefusedAndAdjacentBuffersAllowed) {
  for (Op op : kOps) {
    for (DataType t : kTypes) {
      const std::size_t es = size_of(t);
      const std::size_t count = 8;
      const std::size_t in_bytes = count * es * (op == Op::kReduceScatter ? 3 : 1);
      const std::size_t out_bytes = count * es * (op == Op::kAllGather ? 3 : 1);
      const std::string what = describe(op, t, 1, 0);
      // The output right after the input, then one element into it.
      EXPECT_EQ(refusal(call_at(op, base, base + in_bytes, count, t), 1, 3), "") << what;
      EXPECT_NE(refusal(call_at(op, base, base + in_bytes - es, count, t), 1, 3), "") << what;
      // The input right after the output, then one element into it.
      EXPECT_EQ(refusal(call_at(op, base + out_bytes, base, count, t), 1, 3), "") << what;
      EXPECT_NE(refusal(call_at(op, base + out_bytes - es, base, count, t), 1, 3), "") << what;
    }
  }
}

TEST(CallChecks, TheRefusalNamesTheCallTheRangesAndTheInPlaceForm) {
  // Rank 1 of 2 gathers 4 float32 with its input one element past its own block.
  auto* out = reinterpret_cast<std::byte*>(std::uintptr_t{0x10000});
  const std::string why =
      refusal(call_at(Op::kAllGather, out + 20, out, 4, DataType::kFloat32), 1, 2);
  for (const char* part : {"rank 1", "all_gather(float32 x 4)", "[0x10014, 0x10024)",
                           "[0x10000, 0x10020)", "input == output + rank * count", "0x10010"}) {
    EXPECT_NE(why.find(part), std::string::npos) << part << " in: " << why;
  }
  const std::string scatter =
      refusal(call_at(Op::kReduceScatter, out, out, 4, DataType::kFloat32), 1, 2);
  EXPECT_NE(scatter.find("output == input + rank * count"), std::string::npos) << scatter;
  const std::string reduce =
      refusal(call_at(Op::kAllReduce, out + 4, out, 4, DataType::kFloat32), 0, 2);
  EXPECT_NE(reduce.find("input == output"), std::string::npos) << reduce;
}

TEST(CallChecks, CallsWithoutElementsAreLeftAloneAndNullBuffersAreNamed) {
  for (Op op : kOps) {
    EXPECT_EQ(refusal(call_at(op, base + 1, base, 0, DataType::kFloat32), 1, 2), "");
    EXPECT_NE(refusal(call_at(op, nullptr, base, 8, DataType::kFloat32), 1, 2).find("null input"),
              std::string::npos);
    EXPECT_NE(refusal(call_at(op, base, nullptr, 8, DataType::kFloat32), 1, 2).find("null output"),
              std::string::npos);
  }
}

// Rooted calls: off the root, the buffer the call does not use may be null; on the root it is
// named. Each in-place form is the root's.
TEST(CallChecks, RootedCallsTakeNullOffTheRootAndTheirOwnInPlaceForms) {
  auto rooted = [](Op op, const void* in, void* out, int root) {
    transport::Call c = call_at(op, in, out, 8, DataType::kFloat32);
    c.root = root;
    return c;
  };
  EXPECT_EQ(refusal(rooted(Op::kGather, base, nullptr, 0), 1, 2), "");
  EXPECT_NE(refusal(rooted(Op::kGather, base, nullptr, 1), 1, 2).find("null output for 16"),
            std::string::npos);
  EXPECT_EQ(refusal(rooted(Op::kScatter, nullptr, base, 0), 1, 2), "");
  EXPECT_NE(refusal(rooted(Op::kScatter, nullptr, base, 1), 1, 2).find("null input for 16"),
            std::string::npos);
  EXPECT_EQ(refusal(rooted(Op::kReduce, base, nullptr, 0), 1, 2), "");
  const std::size_t block = 8 * 4;
  EXPECT_EQ(refusal(rooted(Op::kGather, base + block, base, 1), 1, 2), "");
  EXPECT_NE(refusal(rooted(Op::kGather, base + 4, base, 1), 1, 2), "");
  EXPECT_EQ(refusal(rooted(Op::kScatter, base, base + block, 1), 1, 2), "");
  EXPECT_EQ(refusal(rooted(Op::kReduce, base, base, 1), 1, 2), "");
  EXPECT_NE(refusal(rooted(Op::kReduce, base, base, 2), 1, 2).find("root 2 is not a rank"),
            std::string::npos);
  EXPECT_NE(refusal(call_at(Op::kAllToAll, base, base, 8, DataType::kFloat32), 0, 2)
                .find("none (every block moves)"),
            std::string::npos);
}

TEST(CallChecks, ByteSizesThatDoNotFitInSizeTAreRefusedAtTheBoundary) {
  for (DataType t : kTypes) {
    const std::size_t es = size_of(t);
    // all_reduce: count x element size.
    // (Null buffers: the sizes pass, then the null input is named.)
    EXPECT_NE(refusal(call_at(Op::kAllReduce, nullptr, nullptr, kMax / es, t), 0, 3).find("null"),
              std::string::npos);
    if (es > 1) {
      const std::string why =
          refusal(call_at(Op::kAllReduce, nullptr, nullptr, kMax / es + 1, t), 0, 3);
      EXPECT_NE(why.find("does not fit in size_t"), std::string::npos) << why;
    }
    // all_gather's output and reduce_scatter's input: count x element size x ranks.
    for (Op op : {Op::kAllGather, Op::kReduceScatter}) {
      EXPECT_NE(refusal(call_at(op, nullptr, nullptr, kMax / (es * 3), t), 2, 3).find("null"),
                std::string::npos);
      const std::string why = refusal(call_at(op, nullptr, nullptr, kMax / (es * 3) + 1, t), 2, 3);
      EXPECT_NE(why.find("x 3 ranks"), std::string::npos) << to_string(op) << ": " << why;
      EXPECT_NE(why.find(op == Op::kAllGather ? "output" : "input"), std::string::npos) << why;
    }
  }
  // SIZE_MAX / 4 + 1 float32 are 2^64 bytes, one more than size_t holds, even in a group of one
  // and with real buffers.
  EXPECT_NE(
      refusal(call_at(Op::kAllGather, base, base + 512, kMax / 4 + 1, DataType::kFloat32), 0, 1),
      "");
}

TEST(CallChecks, BuffersRunningPastTheEndOfTheAddressSpaceAreRefused) {
  auto* top = reinterpret_cast<std::byte*>(std::numeric_limits<std::uintptr_t>::max() - 63);
  // 15 float32 (60 bytes) end inside; 16 (64 bytes) would end past the last address.
  EXPECT_EQ(refusal(call_at(Op::kAllReduce, top, base, 15, DataType::kFloat32), 0, 2), "");
  const std::string why = refusal(call_at(Op::kAllReduce, top, base, 16, DataType::kFloat32), 0, 2);
  EXPECT_NE(why.find("past the end of the address space"), std::string::npos) << why;
  EXPECT_NE(refusal(call_at(Op::kAllReduce, base, top, 16, DataType::kFloat32), 0, 2), "");
}

TEST(CallChecks, BroadcastBuffersAreCheckedForSizeAndAddressSpace) {
  auto broadcast_refusal = [](const void* buffer, std::size_t count, DataType t) {
    try {
      check_broadcast_buffer(buffer, count, t, 1);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidInput);
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(broadcast_refusal(base, 8, DataType::kBFloat16), "");
  EXPECT_EQ(broadcast_refusal(nullptr, kMax / 2, DataType::kBFloat16), "");
  const std::string why = broadcast_refusal(nullptr, kMax / 2 + 1, DataType::kBFloat16);
  EXPECT_NE(why.find("broadcast"), std::string::npos) << why;
  EXPECT_NE(why.find("does not fit in size_t"), std::string::npos) << why;
  auto* top = reinterpret_cast<std::byte*>(std::numeric_limits<std::uintptr_t>::max() - 63);
  EXPECT_NE(broadcast_refusal(top, 64, DataType::kUInt8), "");
}

}  // namespace
}  // namespace tpcomm::runtime
