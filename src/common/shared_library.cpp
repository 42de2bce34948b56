// dlopen/dlsym/dlclose behind SharedLibrary.
#include "common/shared_library.hpp"

#include <dlfcn.h>

namespace tpcomm::common {

std::unique_ptr<SharedLibrary> SharedLibrary::open(const char* name, std::string* why_not) {
  void* handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    *why_not = err ? err : "unknown reason";
    return nullptr;
  }
  return std::unique_ptr<SharedLibrary>(new SharedLibrary(handle));
}

SharedLibrary::~SharedLibrary() {
  dlclose(handle_);
}

void* SharedLibrary::symbol(const char* name, bool required) {
  void* p = dlsym(handle_, name);
  if (p == nullptr && required) {
    if (!missing_.empty()) missing_ += ", ";
    missing_ += name;
  }
  return p;
}

}  // namespace tpcomm::common
