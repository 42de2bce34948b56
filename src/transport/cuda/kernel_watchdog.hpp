// The host side of the bounded waits in tpcomm's kernels: a host-mapped record that kernels read
// an abort word from and write their failure into, and a thread that turns such a failure into
// the communicator's error instead of a hang. Shared by the custom and multimem backends.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <thread>

#include "transport/cuda/kernel_names.hpp"

namespace tpcomm::transport::cuda {

class KernelWatchdog {
 public:
  KernelWatchdog() = default;
  ~KernelWatchdog();
  KernelWatchdog(const KernelWatchdog&) = delete;
  KernelWatchdog& operator=(const KernelWatchdog&) = delete;

  // Allocates the host-mapped record on the current device. `what` names the kernels in
  // messages ("custom kernel"); `timeout` is the kernels' wait budget (kernel_wait_budget).
  void create(std::string what, std::chrono::milliseconds timeout);
  // What the kernels get: the abort word and failure record as device pointers, and the
  // timeout in nanoseconds of the GPU's %globaltimer.
  const volatile std::int32_t* device_abort_word() const { return device_abort_; }
  KernelFailure* device_failure() const { return device_failure_; }
  std::uint64_t wait_budget_ns() const { return wait_budget_ns_; }

  // Polls the record every millisecond; a kernel that gave up is reported once.
  void start(std::function<void(const std::string&)> on_failure);
  // Makes every waiting kernel give up.
  void abort();
  bool created() const { return host_ != nullptr; }
  // A failure not yet reported, once.
  std::optional<std::string> take_failure();

 private:
  struct Record {
    volatile std::int32_t abort_word;
    KernelFailure failure;
  };
  KernelFailure read() const;
  std::string text() const;

  std::string what_;
  std::chrono::milliseconds timeout_{0};
  Record* host_ = nullptr;  // host-mapped; the GPU writes `failure`, read through volatile
  const volatile std::int32_t* device_abort_ = nullptr;
  KernelFailure* device_failure_ = nullptr;
  std::uint64_t wait_budget_ns_ = 0;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> reported_{false};
};

}  // namespace tpcomm::transport::cuda
