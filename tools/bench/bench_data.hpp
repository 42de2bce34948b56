// The data of tpcomm bench: rank-dependent inputs whose every result is exact, the buffer sizes
// of each operation, and the #wrong check against a reference computed here.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <new>
#include <utility>
#include <vector>

#include "tpcomm/types.hpp"

namespace tpcomm::cli {

// Buffers aligned as PyTorch's CPU allocator aligns tensors (64 bytes). With plain vectors a
// buffer of 128 KiB or more sat 16 bytes past a page (malloc's mmap'd chunks) or wherever the
// heap put it, depending on the sizes before it, and a W = 2 256 KiB all-reduce read 21-23 us
// in one run and 25-31 in the next as its buffers' alignment changed.
template <typename T>
struct CacheLineAllocator {
  using value_type = T;
  CacheLineAllocator() = default;
  template <typename U>
  CacheLineAllocator(const CacheLineAllocator<U>&) {}  // NOLINT(google-explicit-constructor)
  T* allocate(std::size_t n) {
    const std::size_t bytes = (n * sizeof(T) + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, bytes == 0 ? 64 : bytes);
    if (p == nullptr) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t) { std::free(p); }
  template <typename U>
  bool operator==(const CacheLineAllocator<U>&) const {
    return true;
  }
};
using BenchBytes = std::vector<std::uint8_t, CacheLineAllocator<std::uint8_t>>;

// The bus-bandwidth factor of nccl-tests.
double bus_factor(Op op, int w);

// Elements of input and output per rank for a call whose largest buffer is `bytes`.
std::pair<std::size_t, std::size_t> bench_counts(Op op, std::uint64_t bytes, std::size_t es, int w);

// `n` inputs of this rank in `type`: small integers, exact in every type and every sum.
BenchBytes bench_input(std::size_t n, DataType type, int rank);

// Elements of this rank's `n_out` results that differ from the exact answer.
std::uint64_t count_wrong(Op op, ReduceOp redop, DataType type, const std::uint8_t* out,
                          std::size_t n_out, int rank, int w, std::size_t n_in_per_rank);

}  // namespace tpcomm::cli
