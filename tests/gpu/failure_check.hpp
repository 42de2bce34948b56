// The GPU check's `failure` part (failure_check.cpp): what a failure leaves behind on the GPU.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "tpcomm/bootstrap.hpp"
#include "transport/common/backend.hpp"

namespace tpcomm::gpu_check {

// set_up(bootstrap, comm id, on_failure, timeout): one rank's custom backend, set up and voted.
using FailureSetUp = std::function<std::unique_ptr<transport::CollectiveBackend>(
    std::shared_ptr<Bootstrap>, std::uint64_t, std::function<void(const std::string&)>,
    std::chrono::milliseconds)>;
// on_threads(world, fn): fn(rank, bootstrap) on `world` threads sharing GPU 0.
using OnThreads =
    std::function<void(int, const std::function<void(int, std::shared_ptr<Bootstrap>)>&)>;

// docs/gpu-kernels.md, "No silent wrong result after a failure" (experiment E4), two ranks as
// threads on one GPU, eager then graph:
//  1. rank 0's kernel times out waiting for rank 1, which never calls; rank 1's next launch
//     then fails at entry naming rank 0 (the group's failure word), within 500 ms;
//  2. rank 1 aborts from the host while rank 0's kernel waits for it: rank 0's kernel stops
//     within 200 ms naming rank 1 (not after its 20 s budget);
//  3. after a failure, a CUDA graph replay of a captured call does not complete silently: its
//     stream reports an error (the kernel traps). The context is unusable afterwards: this part
//     runs last, and the process exits right after it.
// Returns 0 when all three hold.
int failure_check(const FailureSetUp& set_up, const OnThreads& on_threads);

}  // namespace tpcomm::gpu_check
