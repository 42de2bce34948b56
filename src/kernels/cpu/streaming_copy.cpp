#include "streaming_copy.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace tpcomm::kernels::cpu {

void streaming_copy(void* to, const void* from, std::size_t bytes) {
#if defined(__x86_64__)
  auto* d = static_cast<std::uint8_t*>(to);
  const auto* s = static_cast<const std::uint8_t*>(from);
  // Non-temporal stores need 16-byte aligned destinations: the head up to a 64-byte boundary
  // goes through memcpy, then whole lines, then the tail.
  const std::size_t head = std::min(bytes, (64 - reinterpret_cast<std::uintptr_t>(d) % 64) % 64);
  std::memcpy(d, s, head);
  std::size_t i = head;
  for (; i + 64 <= bytes; i += 64) {
    auto* line = reinterpret_cast<__m128i*>(d + i);
    const auto* src = reinterpret_cast<const __m128i*>(s + i);
    _mm_stream_si128(line, _mm_loadu_si128(src));
    _mm_stream_si128(line + 1, _mm_loadu_si128(src + 1));
    _mm_stream_si128(line + 2, _mm_loadu_si128(src + 2));
    _mm_stream_si128(line + 3, _mm_loadu_si128(src + 3));
  }
  std::memcpy(d + i, s + i, bytes - i);
  _mm_sfence();  // streaming stores are weakly ordered: drain them before anyone is told
#else
  std::memcpy(to, from, bytes);
#endif
}

void* copy_block(void* to, const void* from, std::size_t bytes, bool own) {
  if (own && bytes >= kStreamingCopyMinBytes) {
    streaming_copy(to, from, bytes);
    return to;
  }
  return std::memcpy(to, from, bytes);
}

}  // namespace tpcomm::kernels::cpu
