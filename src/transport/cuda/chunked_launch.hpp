// How a call is cut into kernel launches, the same for every GPU kernel family: `per_chunk`
// elements per launch (what one step's buffer holds), the arguments pointed at each chunk.
#pragma once

#include <algorithm>
#include <cstddef>

#include "driver_api.hpp"
#include "transport/common/backend.hpp"
#include "transport/cuda/kernel_names.hpp"

namespace tpcomm::transport::cuda {

// `launch(args, stream)` returns a cudaError_t as int; `what` names it in the error.
template <typename Args, typename Launch>
void launch_in_chunks(const Call& c, std::size_t per_chunk, Args& a, Launch launch,
                      const char* what) {
  const std::size_t es = size_of(c.type);
  const std::size_t chunks = chunk_count(c.count, per_chunk);
  for (std::size_t k = 0; k < chunks; ++k) {
    const std::size_t base = k * per_chunk;
    a.count = std::min(per_chunk, c.count - std::min(base, c.count));
    a.input = static_cast<const char*>(c.input) + base * es;
    a.output = static_cast<char*>(c.output) + base * es;
    a.in_rank_stride = c.count * es;
    a.out_rank_stride = c.count * es;
    if constexpr (requires { a.slot_offset; }) a.slot_offset = base * es;
    check_cuda(launch(a, c.stream), what);
  }
}

}  // namespace tpcomm::transport::cuda
