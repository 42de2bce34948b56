// A call's arguments as the Python layer passes them to tpcomm._tpcomm.Comm: buffers as integer
// addresses, dtypes and ops as their codes (DTYPE_CODES, OP_CODES), streams as integer handles.
// Shared by the files that bind the calls.
#pragma once

#include <cstdint>
#include <optional>

#include <fmt/format.h>
#include <pybind11/pybind11.h>

#include "comm_holder.hpp"
#include "tpcomm/error.hpp"
#include "tpcomm/types.hpp"

namespace tpcomm::python {

// A dtype or op as the Python layer passes it: its value in Names<E>::table, checked, never
// scanned for by name.
template <typename E>
E code_of(int code, const char* what) {
  for (const auto& entry : Names<E>::table) {
    if (static_cast<int>(entry.value) == code) return entry.value;
  }
  throw invalid_input(fmt::format("{} code {} is not one of tpcomm's", what, code));
}

using Stream = std::optional<std::uintptr_t>;

// Runs `call` with the stream (a kCuda communicator's overloads) or without: call(stream...).
template <typename Call>
void on_stream(const Stream& stream, Call&& call) {
  if (stream) {
    call(reinterpret_cast<CudaStream>(*stream));
  } else {
    call();
  }
}

inline const void* in_ptr(std::uintptr_t p) {
  return reinterpret_cast<const void*>(p);
}
inline void* out_ptr(std::uintptr_t p) {
  return reinterpret_cast<void*>(p);
}

// all_reduce_rmsnorm (bindings_norm.cpp).
void bind_norm(pybind11::class_<Comm>& c);

}  // namespace tpcomm::python
