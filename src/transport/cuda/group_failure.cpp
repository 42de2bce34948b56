#include "group_failure.hpp"

#include <cuda_runtime_api.h>

#include <chrono>
#include <thread>

#include "device_guard.hpp"

namespace tpcomm::transport::cuda {
// The copies run on the copy engines, beside a kernel of this rank that holds the SMs.
bool finished_within_a_second(void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  cudaError_t e;
  while ((e = cudaStreamQuery(s)) == cudaErrorNotReady &&
         std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return e == cudaSuccess;
}

bool publish_group_failure(int device, const std::uint64_t* own,
                           const std::vector<std::uint64_t*>& words, std::uint64_t value,
                           void* stream) {
  const DeviceGuard on_device(device, std::nothrow);  // the caller's comes back (device_guard.hpp)
  bool wrote = false;
  if (on_device.current()) {
    auto s = static_cast<cudaStream_t>(stream);
    std::uint64_t current = 1;  // pageable memory: the runtime stages it within the call
    if (cudaMemcpyAsync(&current, own, sizeof(current), cudaMemcpyDeviceToHost, s) == cudaSuccess &&
        finished_within_a_second(s) && current == 0) {
      for (std::uint64_t* w : words) {
        if (w != nullptr) cudaMemcpyAsync(w, &value, sizeof(value), cudaMemcpyHostToDevice, s);
      }
      wrote = finished_within_a_second(s);
    }
  }
  cudaGetLastError();
  return wrote;
}

}  // namespace tpcomm::transport::cuda
