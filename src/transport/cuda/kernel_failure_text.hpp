// What the host says about a kernel's failure record (kernel_codes.hpp): pure, so the unit tests
// check every message without a GPU.
#pragma once

#include <chrono>
#include <string>

#include "transport/cuda/kernel_names.hpp"

namespace tpcomm::transport::cuda {

// `what` names the kernels ("custom kernel"); `budget` is their wait budget.
std::string kernel_failure_text(const KernelFailure& f, const std::string& what,
                                std::chrono::milliseconds budget);

// The device-side wait budget of the kernels: `kernel_timeout` when set (TPCOMM_KERNEL_TIMEOUT_MS,
// CudaOptions::kernel_timeout), else the communicator's timeout.
std::chrono::milliseconds kernel_wait_budget(std::chrono::milliseconds timeout,
                                             std::chrono::milliseconds kernel_timeout);

}  // namespace tpcomm::transport::cuda
