// The vocabulary's one computed fact; names live in the tables of types.hpp.
#include "tpcomm/types.hpp"

namespace tpcomm {

std::size_t size_of(DataType type) {
  switch (type) {
    case DataType::kFloat16:
    case DataType::kBFloat16:
      return 2;
    case DataType::kInt64:
      return 8;
    case DataType::kUInt8:
      return 1;
    case DataType::kFloat32:
    case DataType::kInt32:
      break;
  }
  return 4;
}

}  // namespace tpcomm
