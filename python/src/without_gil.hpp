// Destroying what joins tpcomm's threads or waits on the store (a Communicator, a StoreHost) with
// the GIL released. pybind11 (2.10, without release_gil_before_calling_cpp_dtor) runs the
// destructor of a garbage-collected object under the GIL, and a tpcomm thread that logs through a
// Python log sink takes the GIL: the destructor would wait for the thread, and the thread for
// the GIL, for ever; a store cut off would hold every Python thread until the deadline.
#pragma once

#include <memory>

#include <pybind11/pybind11.h>

namespace tpcomm::python {

template <typename T>
void destroy_without_gil(std::unique_ptr<T>& object) {
  if (!object) return;
  // Held by this thread when Python drops the object; not where a call already released it.
  if (PyGILState_Check()) {
    pybind11::gil_scoped_release release;
    object.reset();
  } else {
    object.reset();
  }
}

}  // namespace tpcomm::python
