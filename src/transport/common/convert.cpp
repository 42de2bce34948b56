// Conversions to and from fp32, and the names of element types and reductions.
#include "convert.hpp"

namespace tpcomm {

std::size_t size_of(DataType type) {
  return type == DataType::kFloat32 ? 4 : 2;
}

std::string_view to_string(DataType type) {
  switch (type) {
    case DataType::kFloat32:
      return "float32";
    case DataType::kFloat16:
      return "float16";
    case DataType::kBFloat16:
      return "bfloat16";
  }
  return "unknown";
}

std::string_view to_string(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kMin:
      return "min";
    case ReduceOp::kAvg:
      return "avg";
  }
  return "unknown";
}

namespace transport {

void to_float(const void* src, DataType type, std::size_t count, float* dst) {
  if (type == DataType::kFloat32) {
    std::memcpy(dst, src, count * sizeof(float));
    return;
  }
  const auto* s = static_cast<const std::uint16_t*>(src);
  if (type == DataType::kBFloat16) {
    for (std::size_t i = 0; i < count; ++i) dst[i] = bf16_to_float(s[i]);
  } else {
    for (std::size_t i = 0; i < count; ++i) dst[i] = fp16_to_float(s[i]);
  }
}

void from_float(const float* src, DataType type, std::size_t count, void* dst) {
  if (type == DataType::kFloat32) {
    std::memmove(dst, src, count * sizeof(float));
    return;
  }
  auto* d = static_cast<std::uint16_t*>(dst);
  if (type == DataType::kBFloat16) {
    for (std::size_t i = 0; i < count; ++i) d[i] = float_to_bf16(src[i]);
  } else {
    for (std::size_t i = 0; i < count; ++i) d[i] = float_to_fp16(src[i]);
  }
}

}  // namespace transport
}  // namespace tpcomm
