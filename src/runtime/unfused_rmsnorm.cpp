// The unfused all_reduce_rmsnorm (unfused_rmsnorm.hpp).
#include "unfused_rmsnorm.hpp"

#include <cstring>

#include "kernels/cpu/add_rmsnorm.hpp"
#include "tpcomm/convert.hpp"
#include "transport/common/call_stage.hpp"
#include "transport/cpu/kernel_choice.hpp"

namespace tpcomm::runtime {

void run_unfused_rmsnorm(const transport::Call& call, std::vector<float>& sums,
                         common::FunctionRef<void(const transport::Call&)> all_reduce) {
  if (sums.size() < call.count) sums.resize(call.count);
  if (call.type == DataType::kFloat32) {
    if (call.count > 0) std::memcpy(sums.data(), call.input, call.count * sizeof(float));
  } else {
    to_float(call.input, call.type, call.count, sums.data());
  }
  transport::Call sum =
      transport::stage_of(call, Op::kAllReduce, sums.data(), sums.data(), call.count);
  sum.type = DataType::kFloat32;
  all_reduce(sum);
  const void* srcs[1] = {sums.data()};
  kernels::cpu::add_rmsnorm_rows_with(transport::cpu::chosen_kernel_isa(), srcs, 1,
                                      DataType::kFloat32, call.count / call.norm->hidden, call.type,
                                      *call.norm, call.output);
}

}  // namespace tpcomm::runtime
