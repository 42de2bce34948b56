// streaming_copy (non-temporal stores behind an aligned head) and copy_block against the
// bytes they were given: every destination alignment of a 64-byte line, sizes around the head,
// a whole line and the tail, and the bytes just outside the destination left untouched.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kernels/cpu/streaming_copy.hpp"

namespace tpcomm {
namespace {

std::vector<std::uint8_t> pattern(std::size_t n, std::uint8_t seed) {
  std::vector<std::uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::uint8_t>(i * 131 + seed);
  return v;
}

void expect_copied(const std::vector<std::uint8_t>& dst, std::size_t at,
                   const std::vector<std::uint8_t>& src, std::size_t bytes, const char* what) {
  int wrong = 0;
  for (std::size_t i = 0; i < dst.size(); ++i) {
    const bool inside = i >= at && i < at + bytes;
    const std::uint8_t want = inside ? src[1 + (i - at)] : 0xee;
    if (dst[i] != want && wrong++ < 3) {
      ADD_FAILURE() << what << ": byte " << i << " (offset " << at << ", " << bytes << " bytes) is "
                    << int(dst[i]) << ", expected " << int(want);
    }
  }
}

TEST(StreamingCopy, EveryAlignmentAndSizeCopiesExactlyTheBytes) {
  for (std::size_t bytes : {0u, 1u, 15u, 63u, 64u, 65u, 127u, 1000u, 4096u + 33u}) {
    for (std::size_t at = 0; at < 64; ++at) {
      const auto src = pattern(bytes + 1, static_cast<std::uint8_t>(at));
      std::vector<std::uint8_t> dst(bytes + 128, 0xee);
      // Source at an odd offset too: the loads are unaligned ones.
      kernels::cpu::streaming_copy(dst.data() + at, src.data() + 1, bytes);
      expect_copied(dst, at, src, bytes, "streaming_copy");
    }
  }
}

TEST(StreamingCopy, OwnBlocksAboveTheThresholdStreamAndBelowItCopyTheSame) {
  for (std::size_t bytes :
       {kernels::cpu::kStreamingCopyMinBytes - 1, kernels::cpu::kStreamingCopyMinBytes + 77}) {
    const auto src = pattern(bytes + 1, 7);
    std::vector<std::uint8_t> dst(bytes + 128, 0xee);
    EXPECT_EQ(kernels::cpu::copy_block(dst.data() + 5, src.data() + 1, bytes, true),
              dst.data() + 5);
    expect_copied(dst, 5, src, bytes, "copy_block");
  }
}

}  // namespace
}  // namespace tpcomm
