// The vocabulary's one computed fact; names live in the tables of types.hpp.
#include "tpcomm/types.hpp"

namespace tpcomm {

std::size_t size_of(DataType type) {
  return type == DataType::kFloat32 ? 4 : 2;
}

}  // namespace tpcomm
