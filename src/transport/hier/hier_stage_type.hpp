// The type hier's stages carry, and the conversions into it and out of it at a call's ends.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/convert.hpp"
#include "tpcomm/types.hpp"

namespace tpcomm::transport {

// The type the stages carry: fp32 for floating-point calls (one rounding, at the end), an
// integer call's own type (exact as it is).
inline DataType stage_type(DataType type) {
  return is_floating(type) ? DataType::kFloat32 : type;
}
inline void widen(const void* from, DataType type, std::size_t count, std::uint8_t* to) {
  if (is_floating(type)) {
    to_float(from, type, count, reinterpret_cast<float*>(to));
  } else if (count > 0) {
    std::memcpy(to, from, count * size_of(type));
  }
}
inline void narrow(const std::uint8_t* from, DataType type, std::size_t count, void* to) {
  if (is_floating(type)) {
    from_float(reinterpret_cast<const float*>(from), type, count, to);
  } else if (count > 0) {
    std::memcpy(to, from, count * size_of(type));
  }
}

}  // namespace tpcomm::transport
