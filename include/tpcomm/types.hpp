// Element types and reduction operations of collective calls.
#pragma once

#include <cstddef>
#include <string_view>

namespace tpcomm {

enum class DataType { kFloat32, kFloat16, kBFloat16 };
// kAvg is the sum divided by the world size (computed in fp32 before rounding).
enum class ReduceOp { kSum, kMax, kMin, kAvg };

std::size_t size_of(DataType type);
std::string_view to_string(DataType type);
std::string_view to_string(ReduceOp op);

}  // namespace tpcomm
