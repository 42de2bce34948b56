// tpcomm._tpcomm.Comm's hold on its C++ Communicator. The rules for close() from another thread,
// calls in flight and fork() are the library's own (Communicator::close,
// src/runtime/call_gate.hpp), so C++ users get them too; what is left here is the GIL: the calls
// release it, and the last Comm destroys a communicator nobody closed with the GIL released
// (without_gil.hpp).
#pragma once

#include <memory>

#include "tpcomm/communicator.hpp"
#include "without_gil.hpp"

namespace tpcomm::python {

class Comm {
 public:
  explicit Comm(std::unique_ptr<Communicator> c)
      : comm_(c.release(), [](Communicator* p) {
          std::unique_ptr<Communicator> owned(p);
          destroy_without_gil(owned);
        }) {}

  Communicator& operator*() const { return *comm_; }
  Communicator* operator->() const { return comm_.get(); }

 private:
  std::shared_ptr<Communicator> comm_;  // shared: pybind11 moves and copies Comm values around
};

}  // namespace tpcomm::python
