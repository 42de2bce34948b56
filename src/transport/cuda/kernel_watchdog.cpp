// The kernels' failure record and the watchdog thread (kernel_watchdog.hpp).
#include "kernel_watchdog.hpp"

#include <cuda_runtime_api.h>

#include <cstring>

#include <fmt/format.h>

#include "common/log_format.hpp"
#include "driver_api.hpp"
#include "kernel_failure_text.hpp"

namespace tpcomm::transport::cuda {

KernelWatchdog::~KernelWatchdog() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  if (host_ != nullptr) cudaFreeHost(host_);
}

void KernelWatchdog::create(std::string what, std::chrono::milliseconds timeout) {
  what_ = std::move(what);
  timeout_ = timeout;
  void* host = nullptr;
  check_cuda(cudaHostAlloc(&host, sizeof(Record), cudaHostAllocMapped),
             "cudaHostAlloc (watchdog record)");
  std::memset(host, 0, sizeof(Record));
  host_ = static_cast<Record*>(host);
  void* device_view = nullptr;
  check_cuda(cudaHostGetDevicePointer(&device_view, host_, 0), "cudaHostGetDevicePointer");
  auto* dev = static_cast<Record*>(device_view);
  device_abort_ = &dev->abort_word;
  device_failure_ = &dev->failure;
  wait_budget_ns_ = static_cast<std::uint64_t>(timeout.count()) * 1'000'000ull;
}

KernelFailure KernelWatchdog::read() const {
  const volatile KernelFailure& v = host_->failure;
  KernelFailure f{};  // claimed and unused stay zero: only the published fields are read
  f.code = v.code;
  f.rank = v.rank;
  f.peer = v.peer;
  f.phase = v.phase;
  f.step = v.step;
  return f;
}

std::string KernelWatchdog::text() const {
  return kernel_failure_text(read(), what_, timeout_);
}

void KernelWatchdog::start(std::function<void(const std::string&)> on_failure) {
  thread_ = std::thread([this, on_failure = std::move(on_failure)] {
    while (!stop_.load()) {
      const int code = read().code;
      // Not this rank's own abort (2): its cause is reported by whoever aborted.
      if (code != 0 && code != 2 && !reported_.exchange(true)) {
        const std::string t = text();
        TPCOMM_LOG(kError, "cuda", "{}", t);
        if (on_failure) on_failure(t);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
}

void KernelWatchdog::abort() {
  if (host_ != nullptr) host_->abort_word = 1;
}

std::optional<std::string> KernelWatchdog::take_failure() {
  if (host_ == nullptr || read().code == 0 || reported_.exchange(true)) return std::nullopt;
  return text();
}

}  // namespace tpcomm::transport::cuda
