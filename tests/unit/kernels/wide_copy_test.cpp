// The kernels' copy (src/kernels/cuda/wide_copy.hpp; docs/gpu-kernels.md, "Copies at any
// alignment") on the host: for every source and destination misalignment 0..15 and every length
// 0..64 (and a few large ones), shared by 1, 3 or 512 threads, every byte against a plain byte loop
// written here, nothing outside the destination touched, the chosen width the widest both addresses
// share, and every access aligned to its own width on both sides, each byte moved by exactly one
// access; and the same for the multimem kernels' partial vectors (up to 16 bytes on one thread).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cuda/wide_copy.hpp"

namespace tpcomm::kernels::cuda {
namespace {

constexpr std::size_t kGuard = 64;  // untouched bytes checked before and after the destination

// Buffers whose base is 64-byte aligned, so an offset is the address's misalignment.
struct Aligned {
  std::vector<unsigned char> storage;
  unsigned char* base;
  explicit Aligned(std::size_t bytes) : storage(bytes + 64) {
    const auto raw = reinterpret_cast<std::uintptr_t>(storage.data());
    base = storage.data() + (64 - raw % 64) % 64;
  }
};

// The widest of 16, 8, 4, 2, 1 dividing both offsets, computed apart from the header.
std::size_t expected_width(std::size_t dst_misalign, std::size_t src_misalign) {
  for (std::size_t w : {16, 8, 4, 2}) {
    if (dst_misalign % w == 0 && src_misalign % w == 0) return w;
  }
  return 1;
}

// Records each access instead of copying.
struct Access {
  std::size_t offset, size;
};
struct Recorder {
  std::vector<Access>* out;
  template <std::size_t W>
  void move(std::size_t offset) const {
    out->push_back({offset, W});
  }
};

// Copies `bytes` from src offset `so` to dst offset `dx` shared by `threads`; the failures, or "".
std::string check_copy(std::size_t so, std::size_t dx, std::size_t bytes, unsigned threads) {
  Aligned src(bytes + 16), dst(bytes + 16 + 2 * kGuard);
  for (std::size_t i = 0; i < bytes + 16; ++i)
    src.base[i] = static_cast<unsigned char>(i * 131 + 7);
  const std::size_t total = bytes + 16 + 2 * kGuard;
  std::memset(dst.base, 0xee, total);
  // The reference: the destination as it must be after the copy, one byte at a time.
  std::vector<unsigned char> want(dst.base, dst.base + total);
  unsigned char* const to = dst.base + kGuard + dx;
  const unsigned char* const from = src.base + so;
  for (std::size_t i = 0; i < bytes; ++i) want[kGuard + dx + i] = from[i];
  for (unsigned t = 0; t < threads; ++t) {
    copy_share(reinterpret_cast<char*>(to), reinterpret_cast<const char*>(from), bytes, t, threads);
  }
  for (std::size_t i = 0; i < total; ++i) {
    if (dst.base[i] != want[i]) {
      return "byte " + std::to_string(i) + " of the destination area (the copy starts at " +
             std::to_string(kGuard + dx) + ") is wrong";
    }
  }
  // The width, and every access of every thread.
  const auto dst_addr = reinterpret_cast<std::uintptr_t>(to);
  const auto src_addr = reinterpret_cast<std::uintptr_t>(from);
  const CopyPlan plan = plan_copy(dst_addr, src_addr, bytes);
  const std::size_t width = expected_width(dx % 16, so % 16);
  if (plan.width != width) {
    return "width " + std::to_string(plan.width) + ", expected " + std::to_string(width);
  }
  std::vector<Access> accesses;
  for (unsigned t = 0; t < threads; ++t) for_each_access(plan, t, threads, Recorder{&accesses});
  std::vector<int> moved(bytes, 0);
  std::size_t narrower = 0;
  for (const Access& a : accesses) {
    if ((dst_addr + a.offset) % a.size != 0 || (src_addr + a.offset) % a.size != 0) {
      return "an access of " + std::to_string(a.size) + " bytes at " + std::to_string(a.offset) +
             " is not aligned to its width";
    }
    if (a.size > width) return "an access wider than the width";
    if (a.size < width) ++narrower;
    for (std::size_t i = a.offset; i < a.offset + a.size; ++i) {
      if (i >= bytes) return "an access past the end";
      ++moved[i];
    }
  }
  for (std::size_t i = 0; i < bytes; ++i) {
    if (moved[i] != 1) return "byte " + std::to_string(i) + " moved " + std::to_string(moved[i]);
  }
  // Only the tail (under one width, in distinct powers of two) is narrower.
  if (narrower > 4 || bytes / width != accesses.size() - narrower) {
    return std::to_string(narrower) + " narrower accesses for " + std::to_string(bytes) + " bytes";
  }
  return "";
}

TEST(WideCopy, EveryMisalignmentAndShortLength) {
  int failures = 0;
  for (std::size_t so = 0; so < 16; ++so) {
    for (std::size_t dx = 0; dx < 16; ++dx) {
      for (std::size_t bytes = 0; bytes <= 64; ++bytes) {
        for (unsigned threads : {1u, 3u, 512u}) {
          const std::string why = check_copy(so, dx, bytes, threads);
          if (why.empty()) continue;
          if (++failures <= 10) {
            ADD_FAILURE() << "source +" << so << ", destination +" << dx << ", " << bytes
                          << " bytes, " << threads << " threads: " << why;
          }
        }
      }
    }
  }
  EXPECT_EQ(failures, 0);
}

TEST(WideCopy, LargeLengths) {
  for (std::size_t bytes : {std::size_t{1000}, std::size_t{4097}, std::size_t{65536 + 15},
                            std::size_t{(1 << 20) + 7}}) {
    for (std::size_t so : {0, 2, 4, 8, 12, 13}) {
      for (std::size_t dx : {0, 4, 6, 8}) {
        const std::string why = check_copy(so, dx, bytes, 512);
        EXPECT_EQ(why, "") << "source +" << so << ", destination +" << dx << ", " << bytes;
      }
    }
  }
}

// The cases the review names: blocks of a reduce-scatter input at q * count * size from an
// aligned base, copied into the aligned workspace.
TEST(WideCopy, ReduceScatterBlocksKeepTheElementWidth) {
  constexpr std::uintptr_t kBase = 0x7f0000000000;
  // bf16, count 257: blocks at +0, +514, +1028, ...: 2-byte accesses, never byte ones.
  EXPECT_EQ(plan_copy(kBase, kBase + 514, 514).width, 2u);
  // fp32, count 1027: 4-byte accesses; count 1026: 8-byte ones.
  EXPECT_EQ(plan_copy(kBase, kBase + 4108, 4108).width, 4u);
  EXPECT_EQ(plan_copy(kBase, kBase + 4104, 4104).width, 8u);
  // Aligned both sides, a length that is not whole vectors: vectors, then an 8-4-2-1 tail.
  const CopyPlan p = plan_copy(kBase, kBase + 32, 16 * 5 + 15);
  EXPECT_EQ(p.width, 16u);
  EXPECT_EQ(p.units, 5u);
  std::vector<Access> accesses;
  for_each_access(p, 0, 1, Recorder{&accesses});
  ASSERT_EQ(accesses.size(), 9u);
  EXPECT_EQ(accesses[5].offset, 80u);
  EXPECT_EQ(accesses[5].size, 8u);
  EXPECT_EQ(accesses[8].offset, 94u);
  EXPECT_EQ(accesses[8].size, 1u);
}

// The multimem kernels' partial vectors: up to 16 bytes on one thread at constant offsets, for
// every misalignment of either side.
TEST(WideCopy, WithinOneVector) {
  int failures = 0;
  for (std::size_t so = 0; so < 16; ++so) {
    for (std::size_t dx = 0; dx < 16; ++dx) {
      for (std::size_t n = 0; n <= 16; ++n) {
        Aligned src(32), dst(64);
        for (std::size_t i = 0; i < 32; ++i) src.base[i] = static_cast<unsigned char>(0x40 + i);
        std::memset(dst.base, 0xee, 64);
        std::vector<unsigned char> want(dst.base, dst.base + 64);
        for (std::size_t i = 0; i < n; ++i) want[16 + dx + i] = src.base[so + i];
        copy_within_vector(reinterpret_cast<char*>(dst.base + 16 + dx),
                           reinterpret_cast<const char*>(src.base + so), n);
        const bool bytes_ok = std::memcmp(dst.base, want.data(), 64) == 0;
        // Every access aligned to its width on both sides, none wider than the common width,
        // each byte moved once.
        const std::size_t width = expected_width(dx, so);
        std::vector<Access> accesses;
        for_each_access_within(n, width, Recorder{&accesses});
        std::vector<int> moved(n, 0);
        bool accesses_ok = true;
        for (const Access& a : accesses) {
          accesses_ok = accesses_ok && a.size <= width && (dx + a.offset) % a.size == 0 &&
                        (so + a.offset) % a.size == 0 && a.offset + a.size <= n;
          for (std::size_t i = a.offset; i < a.offset + a.size && i < n; ++i) ++moved[i];
        }
        for (int m : moved) accesses_ok = accesses_ok && m == 1;
        if ((!bytes_ok || !accesses_ok) && ++failures <= 10) {
          ADD_FAILURE() << "source +" << so << ", destination +" << dx << ", " << n
                        << " bytes: " << (bytes_ok ? "" : "wrong bytes ")
                        << (accesses_ok ? "" : "wrong accesses");
        }
      }
    }
  }
  EXPECT_EQ(failures, 0);
}

}  // namespace
}  // namespace tpcomm::kernels::cuda
