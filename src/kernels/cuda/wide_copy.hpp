// Copies whose every access is as wide as both addresses allow (docs/gpu-kernels.md, "Copies at any
// alignment"): 16, 8, 4, 2 or 1 bytes, where the kernels used to fall back to one byte per access
// as soon as either side was not 16-byte aligned (a reduce-scatter input block at q * count * size,
// an all-gather output block, a user tensor at an odd offset). Written once for the kernels and the
// host unit tests (tests/unit/kernels/wide_copy_test.cpp): nvcc compiles it into the kernels, a
// plain C++ compiler into the tests, so the plan and the access pattern the tests check are the
// ones the kernels run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "cuda_layout.hpp"  // TPCOMM_HD, kVecBytes

namespace tpcomm::kernels::cuda {

// The widest access, 16, 8, 4, 2 or 1 bytes, at which both addresses are aligned.
TPCOMM_HD std::size_t common_alignment(std::uintptr_t dst, std::uintptr_t src) {
  const std::uintptr_t both = dst | src;
  std::size_t width = kVecBytes;
  while (width > 1 && both % width != 0) width /= 2;
  return width;
}

// How `bytes` move: `units` accesses of `width` bytes from the start, then the `tail`
// (bytes % width, less than `width`) in pieces of descending powers of two. The length is not
// part of the key: a 16-byte aligned copy of 100 bytes moves six vectors and a 4-byte piece,
// not 25 words. Each tail piece starts where the previous one ended, a multiple of its own
// size away from two addresses aligned to `width`, so it is aligned on both sides too.
struct CopyPlan {
  std::size_t width = 1;
  std::size_t units = 0;
  std::size_t tail = 0;
};
TPCOMM_HD CopyPlan plan_copy(std::uintptr_t dst, std::uintptr_t src, std::size_t bytes) {
  CopyPlan p;
  p.width = common_alignment(dst, src);
  p.units = bytes / p.width;
  p.tail = bytes % p.width;
  return p;
}

// The tail's pieces need no table (an array indexed at run time would live in local memory):
// the piece of S bytes (8, 4, 2, 1) exists when the tail has bit S, and starts where the tail's
// bits from 2S up end, larger pieces first.
TPCOMM_HD std::size_t piece_offset(std::size_t tail, std::size_t size) {
  return tail & ~(2 * size - 1);
}

// (Device passes only: the host compiler behind nvcc does not know the pragma.)
#if defined(__CUDA_ARCH__)
#define TPCOMM_UNROLL _Pragma("unroll")
#else
#define TPCOMM_UNROLL
#endif

// Calls `mover.template move<W>(offset)` for each access that `thread` of `threads` makes: units
// round-robin (thread t takes units t, t + threads, ...; neighbouring threads touch neighbouring
// units, so a warp's accesses coalesce), then the tail's pieces continuing the same rotation.
template <std::size_t W, typename Mover>
TPCOMM_HD void for_each_unit(std::size_t units, unsigned thread, unsigned threads,
                             const Mover& mover) {
  for (std::size_t u = thread; u < units; u += threads) mover.template move<W>(u * W);
}
template <std::size_t S, typename Mover>
TPCOMM_HD void tail_piece(const CopyPlan& p, std::size_t& index, unsigned thread, unsigned threads,
                          const Mover& mover) {
  if ((p.tail & S) == 0) return;
  if (index++ % threads == thread) {
    mover.template move<S>(p.units * p.width + piece_offset(p.tail, S));
  }
}
template <typename Mover>
TPCOMM_HD void for_each_access(const CopyPlan& p, unsigned thread, unsigned threads,
                               const Mover& mover) {
  // One loop per width, so that the access width is a constant inside every loop.
  switch (p.width) {
    case 16:
      for_each_unit<16>(p.units, thread, threads, mover);
      break;
    case 8:
      for_each_unit<8>(p.units, thread, threads, mover);
      break;
    case 4:
      for_each_unit<4>(p.units, thread, threads, mover);
      break;
    case 2:
      for_each_unit<2>(p.units, thread, threads, mover);
      break;
    default:
      for_each_unit<1>(p.units, thread, threads, mover);
      break;
  }
  std::size_t index = p.units;
  tail_piece<8>(p, index, thread, threads, mover);
  tail_piece<4>(p, index, thread, threads, mover);
  tail_piece<2>(p, index, thread, threads, mover);
  tail_piece<1>(p, index, thread, threads, mover);
}

// The same accesses for `n` <= 16 bytes moved by one thread, every offset a compile-time constant
// once the loops are unrolled: the multimem kernels gather a partial vector into registers this
// way (a run-time offset into a local vector would put it in local memory).
template <std::size_t S, std::size_t W, typename Mover>
TPCOMM_HD void piece_within(std::size_t n, const Mover& mover) {
  if constexpr (S < W) {
    if ((n & S) == 0) return;
    const std::size_t at = n & ~(2 * S - 1);
    TPCOMM_UNROLL
    for (std::size_t pos = 0; pos < kVecBytes; pos += 2 * S) {
      if (pos == at) mover.template move<S>(pos);
    }
  }
}
template <std::size_t W, typename Mover>
TPCOMM_HD void accesses_within(std::size_t n, const Mover& mover) {
  TPCOMM_UNROLL
  for (std::size_t i = 0; i < kVecBytes / W; ++i) {
    if ((i + 1) * W <= n) mover.template move<W>(i * W);
  }
  piece_within<8, W>(n, mover);
  piece_within<4, W>(n, mover);
  piece_within<2, W>(n, mover);
  piece_within<1, W>(n, mover);
}
// `width`: common_alignment of the two addresses.
template <typename Mover>
TPCOMM_HD void for_each_access_within(std::size_t n, std::size_t width, const Mover& mover) {
  switch (width) {
    case 16:
      accesses_within<16>(n, mover);
      break;
    case 8:
      accesses_within<8>(n, mover);
      break;
    case 4:
      accesses_within<4>(n, mover);
      break;
    case 2:
      accesses_within<2>(n, mover);
      break;
    default:
      accesses_within<1>(n, mover);
      break;
  }
}

// One access of W bytes: a single load and store of a W-byte type on the device (the plan made
// both addresses W-aligned); memcpy on the host, where a cast would break aliasing rules.
#if defined(__CUDACC__)
template <std::size_t W>
struct DeviceUnit;
template <>
struct DeviceUnit<16> {
  using type = uint4;
};
template <>
struct DeviceUnit<8> {
  using type = uint2;
};
template <>
struct DeviceUnit<4> {
  using type = unsigned;
};
template <>
struct DeviceUnit<2> {
  using type = unsigned short;
};
template <>
struct DeviceUnit<1> {
  using type = unsigned char;
};
#endif
template <std::size_t W>
TPCOMM_HD void move_unit(char* dst, const char* src) {
#if defined(__CUDA_ARCH__)
  using U = typename DeviceUnit<W>::type;
  *reinterpret_cast<U*>(dst) = *reinterpret_cast<const U*>(src);
#else
  std::memcpy(dst, src, W);
#endif
}

struct MoveBytes {
  char* dst;
  const char* src;
  template <std::size_t W>
  TPCOMM_HD void move(std::size_t offset) const {
    move_unit<W>(dst + offset, src + offset);
  }
};

// The part of copying `bytes` from `src` to `dst` that `thread` of `threads` does; every thread
// of the group calling it with the same arguments copies all of it, each byte exactly once.
TPCOMM_HD void copy_share(char* dst, const char* src, std::size_t bytes, unsigned thread,
                          unsigned threads) {
  const CopyPlan p = plan_copy(reinterpret_cast<std::uintptr_t>(dst),
                               reinterpret_cast<std::uintptr_t>(src), bytes);
  for_each_access(p, thread, threads, MoveBytes{dst, src});
}

// Copies `n` <= 16 bytes on one thread, at constant offsets (for_each_access_within).
TPCOMM_HD void copy_within_vector(char* dst, const char* src, std::size_t n) {
  const std::size_t width = common_alignment(reinterpret_cast<std::uintptr_t>(dst),
                                             reinterpret_cast<std::uintptr_t>(src));
  for_each_access_within(n, width, MoveBytes{dst, src});
}

}  // namespace tpcomm::kernels::cuda
