// The GPU check's `communicator` part (communicator_check.cpp).
#pragma once

namespace tpcomm::gpu_check {

// Under `TPCOMM_DISABLE=local tpcomm run -n 1`: a CUDA communicator created as a user does, every
// device call checked, NCCL's all-reduce timed, abort. 0 when every result was right.
int communicator_check();

}  // namespace tpcomm::gpu_check
