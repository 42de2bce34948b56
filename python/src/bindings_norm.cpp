// Comm.all_reduce_rmsnorm (call_args.hpp): the residual, its output and the weight as addresses,
// 0 for no residual; a stream on a kCuda communicator.
#include <pybind11/stl.h>

#include "call_args.hpp"
#include "tpcomm/rmsnorm.hpp"

namespace py = pybind11;

namespace tpcomm::python {

void bind_norm(py::class_<Comm>& c) {
  c.def(
      "all_reduce_rmsnorm",
      [](Comm& comm, std::uintptr_t in, std::uintptr_t out, std::size_t count, int dtype,
         std::uintptr_t residual, std::uintptr_t residual_out, std::uintptr_t weight,
         std::size_t hidden, float eps, Stream stream) {
        RmsNorm norm;
        norm.residual = in_ptr(residual);
        norm.residual_out = out_ptr(residual_out);
        norm.weight = in_ptr(weight);
        norm.hidden = hidden;
        norm.eps = eps;
        const auto t = code_of<DataType>(dtype, "dtype");
        on_stream(stream, [&](auto... s) {
          comm->all_reduce_rmsnorm(in_ptr(in), out_ptr(out), count, t, norm, s...);
        });
      },
      py::call_guard<py::gil_scoped_release>());
}

}  // namespace tpcomm::python
