// tpcomm._tpcomm.RegisteredMemory: what Comm.allocate returns, a writable buffer (the buffer
// protocol) over registered host memory that holds the memory's mapping
// (Communicator::keep_mapped). torch.frombuffer and numpy.frombuffer keep the object they read
// referenced, so the tensor or array Communicator.empty builds on it keeps its memory mapped
// after free(), close() or the communicator's garbage collection (docs/registered.md, "Lifetime and
// failures").
#pragma once

#include <cstdint>
#include <memory>
#include <utility>

#include <pybind11/pybind11.h>

namespace tpcomm::python {

class RegisteredMemory {
 public:
  RegisteredMemory(std::shared_ptr<void> mapping, std::size_t bytes)
      : mapping_(std::move(mapping)), bytes_(bytes) {}
  void* data() const { return mapping_.get(); }
  std::size_t bytes() const { return bytes_; }

 private:
  std::shared_ptr<void> mapping_;
  std::size_t bytes_;
};

inline void bind_registered_memory(pybind11::module_& m) {
  namespace py = pybind11;
  py::class_<RegisteredMemory>(m, "RegisteredMemory", py::buffer_protocol())
      .def_buffer([](RegisteredMemory& r) {
        return py::buffer_info(r.data(), 1, py::format_descriptor<std::uint8_t>::format(), 1,
                               {static_cast<py::ssize_t>(r.bytes())}, {py::ssize_t{1}});
      })
      .def_property_readonly(
          "address",
          [](const RegisteredMemory& r) { return reinterpret_cast<std::uintptr_t>(r.data()); })
      .def("__len__", &RegisteredMemory::bytes);
}

}  // namespace tpcomm::python
