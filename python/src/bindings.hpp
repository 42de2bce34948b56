// The pieces of the extension module tpcomm._tpcomm (module.cpp puts them together).
#pragma once

#include <pybind11/pybind11.h>

namespace tpcomm::python {

// tpcomm.Error and its subclasses, and the translation of tpcomm::Error into them (errors.cpp).
void bind_errors(pybind11::module_& m);
// The Communicator class and StoreHost (bindings_comm.cpp).
void bind_communicator(pybind11::module_& m);

}  // namespace tpcomm::python
