// The multimem kernels (sm_90+ with NVSwitch multicast): all-reduce and reduce-scatter with the
// sum reduced in the switch (multimem.ld_reduce, fp32 accumulation for fp16/bf16) and broadcast
// back (multimem.st); all-gather, and all-reduce / reduce-scatter with max, min or avg, by every
// rank storing its input into its slot on every rank at once (multimem.st) and each rank then
// reducing the slots in rank order, bitwise as the custom kernels do. Barriers add to a counter
// on every rank at once (multimem.red) and wait on their own copy; every wait is bounded by the
// abort word and a time budget. Layout and step sizes: multimem_layout.hpp.
#include "kernels/cuda/kernel_common.cuh"
#include "kernels/cuda/kernel_list.hpp"
#include "multimem_kernel_args.hpp"

namespace tpcomm::kernels::cuda {
namespace {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define TPCOMM_MULTIMEM 1
#endif

__device__ __forceinline__ void fence_alias() {
#ifdef TPCOMM_MULTIMEM
  asm volatile("fence.proxy.alias;" ::: "memory");
#endif
}

__device__ __forceinline__ void multicast_add(std::uint64_t* mc, std::uint64_t v) {
#ifdef TPCOMM_MULTIMEM
  asm volatile("multimem.red.release.sys.global.add.u64 [%0], %1;" ::"l"(mc), "l"(v) : "memory");
#else
  __trap();
#endif
}

// 16 bytes stored into every rank's copy.
__device__ __forceinline__ void multicast_store(char* mc, const uint4& v) {
#ifdef TPCOMM_MULTIMEM
  asm volatile("multimem.st.relaxed.sys.global.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(mc),
               "f"(__uint_as_float(v.x)), "f"(__uint_as_float(v.y)), "f"(__uint_as_float(v.z)),
               "f"(__uint_as_float(v.w)));
#else
  __trap();
#endif
}

// The sum of every rank's 16 bytes at `mc`, reduced in the switch.
template <typename T>
__device__ __forceinline__ uint4 multicast_sum(const char* mc);
template <>
__device__ __forceinline__ uint4 multicast_sum<float>(const char* mc) {
  uint4 v{};
#ifdef TPCOMM_MULTIMEM
  float a, b, c, d;
  asm volatile("multimem.ld_reduce.relaxed.sys.global.add.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(a), "=f"(b), "=f"(c), "=f"(d)
               : "l"(mc));
  v = make_uint4(__float_as_uint(a), __float_as_uint(b), __float_as_uint(c), __float_as_uint(d));
#else
  __trap();
#endif
  return v;
}
template <>
__device__ __forceinline__ uint4 multicast_sum<__nv_bfloat16>(const char* mc) {
  uint4 v{};
#ifdef TPCOMM_MULTIMEM
  asm volatile(
      "multimem.ld_reduce.relaxed.sys.global.add.acc::f32.v4.bf16x2 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(mc));
#else
  __trap();
#endif
  return v;
}
template <>
__device__ __forceinline__ uint4 multicast_sum<__half>(const char* mc) {
  uint4 v{};
#ifdef TPCOMM_MULTIMEM
  asm volatile("multimem.ld_reduce.relaxed.sys.global.add.acc::f32.v4.f16x2 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(mc));
#else
  __trap();
#endif
  return v;
}

// Several switch reductions in flight per thread before their results are stored: `sum(v)` for
// every vector v of [begin, end) this thread owns, `store(v, value)` after each group of kUnroll.
// (The ld_reduce and st asm carry no "memory" clobber: the barriers' fences order them, and
// volatile asm keeps their order among themselves.)
constexpr int kUnroll = 4;
template <typename Sum, typename Store>
__device__ __forceinline__ void in_flight(std::size_t begin, std::size_t end, Sum sum,
                                          Store store) {
  const std::size_t stride = blockDim.x;
  for (std::size_t v0 = begin + threadIdx.x; v0 < end; v0 += stride * kUnroll) {
    uint4 got[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const std::size_t v = v0 + u * stride;
      if (v < end) got[u] = sum(v);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const std::size_t v = v0 + u * stride;
      if (v < end) store(v, got[u]);
    }
  }
}

// The local counters: steps[0] last step, steps[1] finished blocks, then one barrier target per
// (phase, block).
__device__ __forceinline__ unsigned long long* local_words(const MultimemArgs& a) {
  return reinterpret_cast<unsigned long long*>(a.unicast + a.layout.local_offset);
}

// This rank's copy of the group's failure word (kernel_codes.hpp), and the same word on every
// rank at once.
__device__ __forceinline__ std::uint64_t* failed_word(const MultimemArgs& a) {
  return reinterpret_cast<std::uint64_t*>(a.unicast + a.layout.failed_offset);
}
__device__ __forceinline__ std::uint64_t* failed_word_everywhere(const MultimemArgs& a) {
  return reinterpret_cast<std::uint64_t*>(a.multicast + a.layout.failed_offset);
}

// Sets the group's failure word on every rank at once. An add, the multicast operation on 64-bit
// words that every sm_90 switch has: the word only has to become nonzero (two ranks failing at
// the same moment add up to a value whose origin field is garbled, not to zero).
// Only for a timeout: a rank that aborts tells the group from the host (MultimemBackend::abort).
__device__ void tell_the_group(const MultimemArgs& a) {
  if (load_acquire(failed_word(a)) == 0) {
    multicast_add(failed_word_everywhere(a), group_failure_value(1, a.rank));
  }
}

// Every rank adds 1 to this block's pad of `phase` on every rank, then waits until its own copy
// reaches the next multiple of W. Returns false on every thread when the wait gave up: the
// failure is recorded, the group told of a timeout, a graph replay traps.
__device__ bool multicast_barrier(const MultimemArgs& a, int phase, std::uint64_t step) {
  __shared__ int failed;
  // Every thread orders its own stores, through either mapping, before the signal (fences are
  // per thread; the unicast and multicast mappings are different aliases of the same memory).
  fence_alias();
  __threadfence_system();
  __syncthreads();
  if (threadIdx.x == 0) {
    failed = 0;
    const std::size_t pad = static_cast<std::size_t>(phase) * kMaxBlocks + blockIdx.x;
    unsigned long long* target_word = local_words(a) + 2 + pad;
    const std::uint64_t target = *target_word + static_cast<std::uint64_t>(a.world);
    *target_word = target;
    multicast_add(reinterpret_cast<std::uint64_t*>(a.multicast + a.layout.pads_offset) + pad, 1);
    const auto* mine =
        reinterpret_cast<const std::uint64_t*>(a.unicast + a.layout.pads_offset) + pad;
    // A counter does not say who is missing: peer -1.
    const int code = bounded_wait(mine, target, a.abort_word, failed_word(a), a.wait_budget_ns,
                                  a.failure, WaitSite{a.rank, -1, phase, step});
    if (code != 0) {
      if (code == 1) tell_the_group(a);
      failed = 1;
    }
  }
  __syncthreads();
  if (failed != 0) end_failed_launch(a.in_graph);
  fence_alias();  // and every thread's later reads through its own mapping see the peers' stores
  return failed == 0;
}

// 16 bytes of `src` at vector `v` of a buffer of `bytes` (zeros past the end; any alignment:
// off the aligned whole-vector case, as wide pieces as the address allows, wide_copy.hpp).
__device__ __forceinline__ uint4 load_padded(const char* src, std::size_t v, std::size_t bytes) {
  const std::size_t at = v * kVecBytes;
  if (at + kVecBytes <= bytes && reinterpret_cast<std::uintptr_t>(src) % kVecBytes == 0) {
    return *reinterpret_cast<const uint4*>(src + at);
  }
  uint4 out{};
  if (at < bytes) {
    const std::size_t n = bytes - at < kVecBytes ? bytes - at : kVecBytes;
    copy_within_vector(reinterpret_cast<char*>(&out), src + at, n);
  }
  return out;
}

// Writes the part of vector `v` that lies within `bytes` of `dst` (the same way round).
__device__ __forceinline__ void store_clipped(char* dst, std::size_t v, std::size_t bytes,
                                              const uint4& value) {
  const std::size_t at = v * kVecBytes;
  if (at + kVecBytes <= bytes && reinterpret_cast<std::uintptr_t>(dst) % kVecBytes == 0) {
    *reinterpret_cast<uint4*>(dst + at) = value;
    return;
  }
  if (at >= bytes) return;
  const std::size_t n = bytes - at < kVecBytes ? bytes - at : kVecBytes;
  copy_within_vector(dst + at, reinterpret_cast<const char*>(&value), n);
}

__device__ __forceinline__ std::size_t vectors(std::size_t bytes) {
  return (bytes + kVecBytes - 1) / kVecBytes;
}

// The pointers of one step: this rank's data area (unicast and multicast aliases), the buffers.
struct StepBuffers {
  char* uc;
  char* mc;
  const char* in;
  char* out;
};

// All-reduce in the switch: copy in (zeros past the end), barrier, each rank reduces its share
// of the block's vectors in the switch and stores the sums into every rank's result half,
// barrier, copy out.
template <typename T>
__device__ void reduce_in_switch(const MultimemArgs& a, std::uint64_t step, const StepBuffers& s) {
  const std::size_t bytes = a.count * sizeof(T), half = a.layout.area_bytes / 2;
  const Range rv = split(vectors(bytes), static_cast<int>(gridDim.x), static_cast<int>(blockIdx.x));
  for (std::size_t v = rv.begin + threadIdx.x; v < rv.end; v += blockDim.x) {
    *reinterpret_cast<uint4*>(s.uc + v * kVecBytes) = load_padded(s.in, v, bytes);
  }
  if (!multicast_barrier(a, 0, step)) return;
  const Range mine = split(rv.size(), a.world, a.rank);
  in_flight(
      rv.begin + mine.begin, rv.begin + mine.end,
      [&](std::size_t v) { return multicast_sum<T>(s.mc + v * kVecBytes); },
      [&](std::size_t v, const uint4& sum) { multicast_store(s.mc + half + v * kVecBytes, sum); });
  if (!multicast_barrier(a, 1, step)) return;
  for (std::size_t v = rv.begin + threadIdx.x; v < rv.end; v += blockDim.x) {
    store_clipped(s.out, v, bytes, *reinterpret_cast<const uint4*>(s.uc + half + v * kVecBytes));
  }
}

// Reduce-scatter in the switch: every input block at a whole-vector stride, barrier, this rank
// sums its own block of every rank's copy in the switch.
template <typename T>
__device__ void reduce_scatter_in_switch(const MultimemArgs& a, std::uint64_t step,
                                         const StepBuffers& s) {
  const std::size_t bytes = a.count * sizeof(T), stride = vectors(bytes) * kVecBytes;
  const Range rv = split(vectors(bytes), static_cast<int>(gridDim.x), static_cast<int>(blockIdx.x));
  for (int q = 0; q < a.world; ++q) {
    const char* src = s.in + static_cast<std::size_t>(q) * a.in_rank_stride;
    for (std::size_t v = rv.begin + threadIdx.x; v < rv.end; v += blockDim.x) {
      *reinterpret_cast<uint4*>(s.uc + q * stride + v * kVecBytes) = load_padded(src, v, bytes);
    }
  }
  if (!multicast_barrier(a, 0, step)) return;
  in_flight(
      rv.begin, rv.end,
      [&](std::size_t v) { return multicast_sum<T>(s.mc + a.rank * stride + v * kVecBytes); },
      [&](std::size_t v, const uint4& sum) { store_clipped(s.out, v, bytes, sum); });
}

// Gather: this rank's input into its slot on every rank, barrier, then the slots locally. A
// reduce-scatter input is W blocks (not always contiguous), each at a whole-vector stride.
// Each thread block reads only what the same block of every rank stored (its barrier covers
// nothing else), so stores and reads use the same vector range.
template <typename T, int MaxW>
__device__ void gather_then_local(const MultimemArgs& a, std::uint64_t step, const StepBuffers& s) {
  constexpr std::size_t es = sizeof(T);
  const std::size_t slot =
      a.layout.area_bytes / static_cast<std::size_t>(a.world) / kVecBytes * kVecBytes;
  const std::size_t block_bytes = a.count * es, stride = vectors(block_bytes) * kVecBytes;
  const int blocks_in = a.op == KernelOp::kReduceScatter ? a.world : 1;
  const Range rv =
      split(vectors(block_bytes), static_cast<int>(gridDim.x), static_cast<int>(blockIdx.x));
  for (int q = 0; q < blocks_in; ++q) {
    const char* src = s.in + static_cast<std::size_t>(q) * a.in_rank_stride;
    for (std::size_t v = rv.begin + threadIdx.x; v < rv.end; v += blockDim.x) {
      multicast_store(s.mc + a.rank * slot + q * stride + v * kVecBytes,
                      load_padded(src, v, block_bytes));
    }
  }
  if (!multicast_barrier(a, 0, step)) return;
  constexpr std::size_t per_vec = kVecBytes / es;
  const std::size_t first = rv.begin * per_vec;
  const std::size_t last = rv.end * per_vec < a.count ? rv.end * per_vec : a.count;
  if (first >= last) return;
  if (a.op == KernelOp::kAllGather) {
    for (int q = 0; q < a.world; ++q) {
      copy_bytes(s.out + q * a.out_rank_stride + first * es, s.uc + q * slot + first * es,
                 (last - first) * es);
    }
    return;
  }
  // All-reduce (each slot's only block) or reduce-scatter (block `rank`), in rank order.
  const std::size_t at = a.op == KernelOp::kReduceScatter ? a.rank * stride : 0;
  Sources<MaxW> src;
  for (int q = 0; q < MaxW; ++q) src.at[q] = q < a.world ? s.uc + q * slot + at : nullptr;
  reduce_range<T, MaxW>(a.world, a.reduce, src, first, last, s.out);
}

template <typename T, int MaxW>
__global__ void __launch_bounds__(kThreads) multimem_kernel(MultimemArgs a) {
  const LaunchStep launch_step(local_words(a));
  const std::uint64_t step = launch_step.number();
  if (group_failed_on_entry(failed_word(a), a.failure, a.rank, step))
    return end_failed_launch(a.in_graph);
  const std::size_t area = a.layout.data_offset + (step % 2) * a.layout.area_bytes;
  const StepBuffers s{a.unicast + area, a.multicast + area, static_cast<const char*>(a.input),
                      static_cast<char*>(a.output)};
  if (a.mode == MultimemMode::kReduceSum && a.op == KernelOp::kOneShot) {
    reduce_in_switch<T>(a, step, s);
  } else if (a.mode == MultimemMode::kReduceSum) {
    reduce_scatter_in_switch<T>(a, step, s);
  } else {
    gather_then_local<T, MaxW>(a, step, s);
  }
}

template <typename T, int MaxW>
int launch(const MultimemArgs& a, cudaStream_t stream) {
  multimem_kernel<T, MaxW><<<a.blocks, kThreads, 0, stream>>>(a);
  return static_cast<int>(cudaGetLastError());
}

__global__ void multimem_probe(const char* multicast_in, float* result) {
  const uint4 v = multicast_sum<float>(multicast_in);
  result[0] = __uint_as_float(v.x);
  result[1] = __uint_as_float(v.y);
  result[2] = __uint_as_float(v.z);
  result[3] = __uint_as_float(v.w);
}

// One thread: the group's failure word set on every rank (a rank that aborts, from the host).
__global__ void multimem_publish_failure(std::uint64_t* everywhere, std::uint64_t value) {
  multicast_add(everywhere, value);
}

}  // namespace

int launch_multimem_publish_failure(void* multicast_word, std::uint64_t value, void* stream) {
  multimem_publish_failure<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<std::uint64_t*>(multicast_word), value);
  return static_cast<int>(cudaGetLastError());
}

int launch_multimem_kernel(const MultimemArgs& a, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  TPCOMM_DISPATCH_BY_TYPE_AND_WORLD(a, s);
}

int launch_multimem_probe(const void* multicast_in, void* result, void* stream) {
  multimem_probe<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<const char*>(multicast_in), static_cast<float*>(result));
  return static_cast<int>(cudaGetLastError());
}

}  // namespace tpcomm::kernels::cuda
