// A library loaded at run time (dlopen) with its symbols bound by name. CUDA's driver, NVML and
// NCCL are optional: a build without them, or a machine without a GPU, must still work and say
// why a GPU path is off, so nothing links against them.
#pragma once

#include <memory>
#include <string>

namespace tpcomm::common {

class SharedLibrary {
 public:
  // nullptr when the library cannot be loaded; `why_not` then holds dlerror()'s text.
  static std::unique_ptr<SharedLibrary> open(const char* name, std::string* why_not);
  ~SharedLibrary();
  SharedLibrary(const SharedLibrary&) = delete;
  SharedLibrary& operator=(const SharedLibrary&) = delete;

  // Binds `fn` to the symbol `name`. A missing required symbol is remembered for missing().
  template <typename Fn>
  void bind(Fn& fn, const char* name, bool required = true) {
    fn = reinterpret_cast<Fn>(symbol(name, required));
  }
  // Comma list of the required symbols that were not found; empty when all were.
  const std::string& missing() const { return missing_; }

 private:
  explicit SharedLibrary(void* handle) : handle_(handle) {}
  void* symbol(const char* name, bool required);
  void* handle_;
  std::string missing_;
};

}  // namespace tpcomm::common
