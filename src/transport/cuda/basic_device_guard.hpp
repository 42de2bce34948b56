// DeviceGuard's logic (device_guard.hpp) over any runtime that gets and sets the calling thread's
// current device, so that the host tests drive it with a fake (docs/gpu-graphs.md, "The caller's
// current device"). `Runtime` gives
//   static int get_device(int*), static int set_device(int)   (0: success, else the error),
//   static void clear_error()                                  (the runtime's sticky last error),
//   static void fail(int error, const char* what)              (throws when error != 0).
#pragma once

#include <new>

namespace tpcomm::transport::cuda {

template <class Runtime>
class BasicDeviceGuard {
 public:
  // Makes `device` current or throws; the caller's device comes back at the end of the scope.
  explicit BasicDeviceGuard(int device) {
    remember_previous();
    if (previous_ != device) Runtime::fail(Runtime::set_device(device), "cudaSetDevice");
    changed_ = previous_ != device && previous_ >= 0;
    current_ = true;
  }
  // For destructors and failure paths: never throws; when the device cannot be made current,
  // nothing changes (and current() says so).
  BasicDeviceGuard(int device, std::nothrow_t) { enter(device); }
  // Nothing current yet: a member declared first enters in its owner's destructor, so that every
  // other member's destructor runs on the owner's device and the caller's comes back after them.
  BasicDeviceGuard() = default;
  // The non-throwing form, once per guard (a later call changes nothing and says what the first
  // one did).
  bool enter(int device) noexcept {
    if (entered_) return current_;
    entered_ = true;
    remember_previous();
    current_ = previous_ == device || Runtime::set_device(device) == 0;
    changed_ = current_ && previous_ != device && previous_ >= 0;
    Runtime::clear_error();
    return current_;
  }
  bool current() const { return current_; }
  ~BasicDeviceGuard() {
    if (changed_) Runtime::set_device(previous_);
  }
  BasicDeviceGuard(const BasicDeviceGuard&) = delete;
  BasicDeviceGuard& operator=(const BasicDeviceGuard&) = delete;

 private:
  // An unknown previous device (the query failed) is not restored: there is nothing to restore.
  void remember_previous() {
    if (Runtime::get_device(&previous_) != 0) {
      Runtime::clear_error();
      previous_ = -1;
    }
  }

  int previous_ = -1;
  bool changed_ = false;
  bool current_ = false;
  bool entered_ = false;
};

}  // namespace tpcomm::transport::cuda
