// tpcomm.Error (with .code, the library's ErrorCode name) and one subclass per code. Each also
// derives from the builtin a Python caller would catch: TimeoutError, ValueError, RuntimeError.
#include <map>

#include "bindings.hpp"
#include "tpcomm/error.hpp"

namespace py = pybind11;

namespace tpcomm::python {
namespace {

// The classes, created once at import; owned by the module (borrowed here).
std::map<ErrorCode, PyObject*>& classes() {
  static std::map<ErrorCode, PyObject*> c;
  return c;
}

PyObject* make_class(py::module_& m, const char* name, const char* doc, py::tuple bases) {
  const std::string qualified = std::string("tpcomm.") + name;
  PyObject* cls = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases.ptr(), nullptr);
  if (cls == nullptr) throw py::error_already_set();
  m.add_object(name, py::handle(cls));
  return cls;
}

}  // namespace

void bind_errors(py::module_& m) {
  auto builtins = py::module_::import("builtins");
  PyObject* base = make_class(m, "Error",
                              "A tpcomm failure; .code names it (invalid_input, unavailable, "
                              "timeout, mismatch, aborted, internal).",
                              py::make_tuple(builtins.attr("RuntimeError")));
  auto sub = [&](ErrorCode code, const char* name, const char* doc, py::object builtin) {
    classes()[code] = make_class(m, name, doc, py::make_tuple(py::handle(base), builtin));
  };
  sub(ErrorCode::kInvalidInput, "InvalidInputError", "A bad argument, file or setting.",
      builtins.attr("ValueError"));
  sub(ErrorCode::kUnavailable, "UnavailableError",
      "A library, device or resource is missing on this machine.", builtins.attr("RuntimeError"));
  sub(ErrorCode::kTimeout, "TimeoutError", "A wait passed its deadline (a peer did not come).",
      builtins.attr("TimeoutError"));
  sub(ErrorCode::kMismatch, "MismatchError", "Ranks disagree (plan digest, call signature).",
      builtins.attr("RuntimeError"));
  sub(ErrorCode::kAborted, "AbortedError",
      "The communicator was aborted earlier; the message carries the first cause.",
      builtins.attr("RuntimeError"));
  sub(ErrorCode::kInternal, "InternalError", "A bug in tpcomm: please report it.",
      builtins.attr("RuntimeError"));

  // Local to this module: a translator shared through pybind11's internals would see every
  // exception of another module built with the same pybind11 (torch's among them).
  py::register_local_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      PyObject* cls = classes().at(e.code());
      py::object instance =
          py::reinterpret_steal<py::object>(PyObject_CallFunction(cls, "s", e.what()));
      if (!instance) return;                   // the call set its own Python error
      std::string code = to_string(e.code());  // "invalid input" -> "invalid_input"
      for (char& c : code) c = c == ' ' ? '_' : c;
      instance.attr("code") = code;
      PyErr_SetObject(cls, instance.ptr());
    }
  });
}

}  // namespace tpcomm::python
