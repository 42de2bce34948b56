// Device helpers shared by tpcomm's kernels (custom and multimem): memory-model primitives,
// element conversions, 16-byte vectors, and the rank-order reduction every backend uses so that
// results are bitwise the same whichever kernel computed them.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cuda_layout.hpp"
#include "kernels/cuda/kernel_codes.hpp"
#include "wide_copy.hpp"

namespace tpcomm::kernels::cuda {

constexpr int kThreads = 512;

__device__ __forceinline__ void store_release(std::uint64_t* p, std::uint64_t v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ std::uint64_t load_acquire(const std::uint64_t* p) {
  std::uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

// Elements as fp32 and back (round to nearest even).
__device__ __forceinline__ float to_float(float x) {
  return x;
}
__device__ __forceinline__ float to_float(__half x) {
  return __half2float(x);
}
__device__ __forceinline__ float to_float(__nv_bfloat16 x) {
  return __bfloat162float(x);
}
template <typename T>
__device__ __forceinline__ T from_float(float f);
template <>
__device__ __forceinline__ float from_float<float>(float f) {
  return f;
}
template <>
__device__ __forceinline__ __half from_float<__half>(float f) {
  return __float2half_rn(f);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float f) {
  return __float2bfloat16_rn(f);
}

// One 16-byte load that the compiler can neither split nor merge: W of them are issued back to
// back, all in flight together, before any is converted. Volatile, because peers write these
// buffers; the barrier before the reduction orders them.
__device__ __forceinline__ uint4 load_v4(const char* p) {
  uint4 v;
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// 16 bytes of T as fp32 values and back (register arithmetic on the four 32-bit words, never
// a load through a T*), and single elements for the unaligned rest.
template <typename T>
struct Vec;
template <>
struct Vec<float> {
  static constexpr int kN = 4;
  __device__ static void widen(const uint4 v, float* f) {
    f[0] = __uint_as_float(v.x);
    f[1] = __uint_as_float(v.y);
    f[2] = __uint_as_float(v.z);
    f[3] = __uint_as_float(v.w);
  }
  __device__ static uint4 narrow(const float* f) {
    return make_uint4(__float_as_uint(f[0]), __float_as_uint(f[1]), __float_as_uint(f[2]),
                      __float_as_uint(f[3]));
  }
};
template <>
struct Vec<__nv_bfloat16> {
  static constexpr int kN = 8;
  // A bf16 is the high half of an fp32: widening is a shift or a mask.
  __device__ static void widen(const uint4 v, float* f) {
    const unsigned w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      f[2 * i] = __uint_as_float(w[i] << 16);
      f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
  }
  __device__ static uint4 narrow(const float* f) {
    unsigned w[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const __nv_bfloat162 pair = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
      w[i] = *reinterpret_cast<const unsigned*>(&pair);
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
  }
};
template <>
struct Vec<__half> {
  static constexpr int kN = 8;
  __device__ static void widen(const uint4 v, float* f) {
    const unsigned w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 pair = __half22float2(*reinterpret_cast<const __half2*>(&w[i]));
      f[2 * i] = pair.x;
      f[2 * i + 1] = pair.y;
    }
  }
  __device__ static uint4 narrow(const float* f) {
    unsigned w[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const __half2 pair = __floats2half2_rn(f[2 * i], f[2 * i + 1]);
      w[i] = *reinterpret_cast<const unsigned*>(&pair);
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
  }
};

template <typename T>
__device__ __forceinline__ float element_to_f(const void* p) {
  return to_float(*static_cast<const T*>(p));
}
template <typename T>
__device__ __forceinline__ void element_from_f(void* p, float f) {
  *static_cast<T*>(p) = from_float<T>(f);
}

__device__ __forceinline__ float combine(float acc, float x, int reduce) {
  // tpcomm::ReduceOp: 0 sum, 1 max, 2 min, 3 avg (a sum divided at the end)
  return reduce == kernel_code::kMax   ? fmaxf(acc, x)
         : reduce == kernel_code::kMin ? fminf(acc, x)
                                       : acc + x;
}

template <int MaxW>
struct Sources {
  const char* at[MaxW];
};
// Reduces elements [begin, end) of every rank's source in rank order into `out`. Whole vectors
// where the element range and every side allow it, single elements for the rest.
template <typename T, int MaxW>
__device__ void reduce_range(int world, int reduce, const Sources<MaxW>& sources, std::size_t begin,
                             std::size_t end, char* out) {
  using V = Vec<T>;
  constexpr std::size_t es = sizeof(T);
  const char* const* src = sources.at;
  // Vector loads need every source aligned too: a reduce-scatter block starts at
  // rank * count elements, which is not a whole vector for every count, and registered inputs
  // are wherever the caller put them.
  bool aligned = reinterpret_cast<std::uintptr_t>(out) % kVecBytes == 0;
  for (int r = 0; r < MaxW && r < world; ++r) {
    aligned = aligned && reinterpret_cast<std::uintptr_t>(src[r]) % kVecBytes == 0;
  }
  const std::size_t vb = (begin + V::kN - 1) / V::kN, ve = end / V::kN;
  auto finish = [&](float x) {
    return reduce == kernel_code::kAvg ? x / static_cast<float>(world) : x;
  };
  if (aligned && vb < ve) {
    for (std::size_t v = vb + threadIdx.x; v < ve; v += blockDim.x) {
      // Every rank's vector first (all W loads in flight up to W=8; four at a time in the W=16
      // kernels, where more spills registers at 512 threads), then the conversions and the
      // rank-order accumulation.
      constexpr int kBatch = MaxW <= 8 ? MaxW : 4;
      float acc[V::kN], x[V::kN];
#pragma unroll
      for (int first = 0; first < MaxW; first += kBatch) {
        uint4 raw[kBatch];
#pragma unroll
        for (int j = 0; j < kBatch; ++j) {
          if (first + j < world) raw[j] = load_v4(src[first + j] + v * kVecBytes);
        }
#pragma unroll
        for (int j = 0; j < kBatch; ++j) {
          if (first + j == 0) {
            V::widen(raw[0], acc);
          } else if (first + j < world) {
            V::widen(raw[j], x);
#pragma unroll
            for (int i = 0; i < V::kN; ++i) acc[i] = combine(acc[i], x[i], reduce);
          }
        }
      }
#pragma unroll
      for (int i = 0; i < V::kN; ++i) acc[i] = finish(acc[i]);
      *reinterpret_cast<uint4*>(out + v * kVecBytes) = V::narrow(acc);
    }
  }
  auto scalar = [&](std::size_t i) {
    float acc = element_to_f<T>(src[0] + i * es);
    for (int r = 1; r < MaxW; ++r) {
      if (r >= world) break;
      acc = combine(acc, element_to_f<T>(src[r] + i * es), reduce);
    }
    element_from_f<T>(out + i * es, finish(acc));
  };
  if (aligned && vb < ve) {
    for (std::size_t i = begin + threadIdx.x; i < vb * V::kN; i += blockDim.x) scalar(i);
    for (std::size_t i = ve * V::kN + threadIdx.x; i < end; i += blockDim.x) scalar(i);
  } else {
    for (std::size_t i = begin + threadIdx.x; i < end; i += blockDim.x) scalar(i);
  }
}

// Copies `bytes`, every thread of the block its share, each access as wide as both addresses allow
// (wide_copy.hpp: 16-byte vectors where both sides are aligned, else 8, 4 or 2 bytes; single bytes
// only where an address is odd, or for the last byte of an odd length).
__device__ inline void copy_bytes(char* dst, const char* src, std::size_t bytes) {
  copy_share(dst, src, bytes, threadIdx.x, blockDim.x);
}

// The waits are bounded: a wait gives up when the abort word or the group's failure word is set,
// or after `budget_ns` nanoseconds of %globaltimer — wall time, unlike a cycle count that depends
// on the clock the SM runs at — recording the first failure of the launch (rank, the peer
// awaited or -1 when unknown, barrier phase, launch step) for the host watchdog.
struct WaitSite {
  int rank;
  int peer;
  int phase;
  std::uint64_t step;
};
__device__ __forceinline__ std::uint64_t global_timer_ns() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
// Records the first failure of the launch for the host watchdog (one thread wins `claimed`).
__device__ inline void record_failure(KernelFailure* failure, int code, const WaitSite& site) {
  if (atomicCAS(&failure->claimed, 0, 1) != 0) return;
  failure->rank = site.rank;
  failure->peer = site.peer;
  failure->phase = site.phase;
  failure->step = site.step;
  __threadfence_system();
  atomicExch(&failure->code, code);  // published last
  __threadfence_system();
}

// Waits until `flag` reaches `target`. Returns 0, or the failure code (kernel_codes.hpp) when
// it gave up: 1 the budget ran out, 2 this rank's host abort word, 3 the group's failure word
// (`group_failed`, this rank's copy, written by a peer that gave up or aborted).
__device__ inline int bounded_wait(const std::uint64_t* flag, std::uint64_t target,
                                   const volatile std::int32_t* abort_word,
                                   const std::uint64_t* group_failed, std::uint64_t budget_ns,
                                   KernelFailure* failure, WaitSite site) {
  const std::uint64_t start = global_timer_ns();
  unsigned spins = 0;
  while (!reached(load_acquire(flag), target)) {
    // The abort word is host memory: a read crosses PCIe (about a microsecond), so it, the
    // failure word and the timer are looked at only every kCheckEvery spins, keeping a wait
    // that succeeds fast.
    constexpr unsigned kCheckEvery = 256;
    if (++spins % kCheckEvery != 0) continue;
    int code = 0;
    const std::uint64_t group = load_acquire(group_failed);
    if (*abort_word != 0) code = 2;
    if (group != 0) {
      code = 3;
      site.peer = group_failure_origin(group);
    }
    if (code == 0 && global_timer_ns() - start > budget_ns) code = 1;
    if (code != 0) {
      record_failure(failure, code, site);
      return code;
    }
  }
  return 0;
}

// On entry, block-uniform: whether the group failed before this launch (this rank's copy of the
// failure word is set). The launch then records it and stops before it copies in or signals.
__device__ inline bool group_failed_on_entry(const std::uint64_t* group_failed,
                                             KernelFailure* failure, int rank, std::uint64_t step) {
  __shared__ int failed;
  if (threadIdx.x == 0) {
    const std::uint64_t group = load_acquire(group_failed);
    failed = group != 0;
    if (failed) record_failure(failure, 3, WaitSite{rank, group_failure_origin(group), -1, step});
  }
  __syncthreads();
  return failed != 0;
}

// What a launch that failed does last. Eager, it returns (its output is not written; the host
// watchdog turns the record into the communicator's error, raised by the next call). Replayed
// from a CUDA graph no tpcomm call follows that could raise it: the kernel traps, which makes the
// CUDA context's error sticky, so the program's next synchronisation fails instead of going on
// with a result that was never computed.
__device__ __forceinline__ void end_failed_launch(int in_graph) {
  if (in_graph != 0) __trap();
}

// One step number per launch for every block of a kernel: steps[0] holds the last launch's
// number and steps[1] counts finished blocks; the last block to finish stores this launch's number
// (the next launch on the stream starts after that). The numbers live on the device, so CUDA
// graph replays get fresh ones. A block may refill a data buffer only two steps later, after a
// barrier that proved every peer started the launch in between, hence finished this one.
// Construct at the top of the kernel in every thread; the destructor ends the step.
class LaunchStep {
 public:
  __device__ explicit LaunchStep(unsigned long long* steps) : steps_(steps) {
    __shared__ std::uint64_t step;
    if (threadIdx.x == 0) step = steps[0] + 1;
    __syncthreads();
    step_ = step;
  }
  __device__ ~LaunchStep() {
    __syncthreads();
    if (threadIdx.x == 0 && atomicAdd(&steps_[1], 1ull) + 1 == gridDim.x) {
      steps_[1] = 0;
      steps_[0] = step_;
    }
  }
  LaunchStep(const LaunchStep&) = delete;
  LaunchStep& operator=(const LaunchStep&) = delete;
  __device__ std::uint64_t number() const { return step_; }

 private:
  unsigned long long* steps_;
  std::uint64_t step_;
};

}  // namespace tpcomm::kernels::cuda
