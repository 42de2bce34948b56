// tpcomm._tpcomm.Comm: the C++ Communicator behind tpcomm.Communicator (python/tpcomm), one entry
// per call. Buffers arrive as integer addresses with element counts, dtypes and ops as their codes
// (DTYPE_CODES, OP_CODES), streams as integer handles: the Python layer checks tensors and arrays
// before any rank blocks. Every call that may wait releases the GIL, so other Python threads (a
// watchdog, a server loop) keep running; close() from another thread is the library's own
// Communicator::close (comm_holder.hpp).
#include <chrono>
#include <memory>

#include <fmt/format.h>
#include <pybind11/stl.h>

#include "bindings.hpp"
#include "call_args.hpp"
#include "comm_holder.hpp"
#include "plan/plan_text.hpp"
#include "registered_memory.hpp"
#include "tpcomm/communicator.hpp"
#include "tpcomm/error.hpp"
#include "tpcomm/tuning.hpp"

namespace py = pybind11;

namespace tpcomm::python {
namespace {

template <typename E>
E parse(const std::string& name, const char* what) {
  if (auto v = from_string<E>(name)) return *v;
  std::string known;
  for (const auto& entry : Names<E>::table) {
    known += (known.empty() ? "" : ", ") + std::string(entry.name);
  }
  throw invalid_input(fmt::format("{} '{}' is not one of {}", what, name, known));
}

template <typename E>
py::dict codes_of() {
  py::dict out;
  for (const auto& entry : Names<E>::table) {
    out[py::str(std::string(entry.name))] = static_cast<int>(entry.value);
  }
  return out;
}

CommunicatorOptions options_of(double timeout_s, const std::string& device, int cuda_device,
                               std::optional<int> threads, bool caller_serves_fallback,
                               std::optional<bool> deterministic) {
  CommunicatorOptions o;
  o.deterministic = deterministic;  // unset: TPCOMM_DETERMINISTIC
  o.caller_serves_fallback = caller_serves_fallback;
  o.threads = threads;  // out of range: the library's InvalidInputError, on every rank
  if (timeout_s > 0) {
    o.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(timeout_s * 1000));
  }
  o.device = parse<DeviceType>(device, "device");
  o.cuda_device = cuda_device;
  return o;
}

Deadline deadline_of(double timeout_s) {
  return timeout_s > 0 ? Deadline::after(
                             std::chrono::milliseconds(static_cast<std::int64_t>(timeout_s * 1000)))
                       : Deadline::from_env();
}

// Rank 0's store for from_torch: serves until from_address hands it to the bootstrap.
class Host {
 public:
  explicit Host(const std::string& host) : host_(std::make_unique<StoreHost>(host)) {
    address_ = host_->address();
  }
  Host(Host&&) = default;
  Host& operator=(Host&&) = delete;
  // Never used, dropped by garbage collection: its store's thread, which may log through a
  // Python sink, is joined with the GIL released (without_gil.hpp).
  ~Host() { destroy_without_gil(host_); }
  const std::string& address() const { return address_; }
  std::unique_ptr<StoreHost> take() {
    if (!host_) throw invalid_input("this StoreHost was already used by a communicator");
    return std::move(host_);
  }

 private:
  std::unique_ptr<StoreHost> host_;
  std::string address_;
};

// all_to_all(v) and the rooted calls: a buffer the call does not use on this rank (off the root)
// comes as address 0.
void bind_exchanges(py::class_<Comm>& c) {
  auto rel = py::call_guard<py::gil_scoped_release>();
  c.def(
      "all_to_all",
      [](Comm& comm, std::uintptr_t in, std::uintptr_t out, std::size_t count, int dtype,
         Stream stream) {
        const auto t = code_of<DataType>(dtype, "dtype");
        on_stream(stream,
                  [&](auto... s) { comm->all_to_all(in_ptr(in), out_ptr(out), count, t, s...); });
      },
      rel);
  c.def(
      "all_to_allv",
      [](Comm& comm, std::uintptr_t in, const std::vector<std::size_t>& send_counts,
         std::uintptr_t out, const std::vector<std::size_t>& recv_counts, int dtype,
         Stream stream) {
        const auto t = code_of<DataType>(dtype, "dtype");
        on_stream(stream, [&](auto... s) {
          comm->all_to_allv(in_ptr(in), send_counts, out_ptr(out), recv_counts, t, s...);
        });
      },
      rel);
  c.def(
      "all_gatherv",
      [](Comm& comm, std::uintptr_t in, std::uintptr_t out, const std::vector<std::size_t>& counts,
         int dtype, Stream stream) {
        const auto t = code_of<DataType>(dtype, "dtype");
        on_stream(stream,
                  [&](auto... s) { comm->all_gatherv(in_ptr(in), out_ptr(out), counts, t, s...); });
      },
      rel);
  c.def(
      "reduce_scatterv",
      [](Comm& comm, std::uintptr_t in, std::uintptr_t out, const std::vector<std::size_t>& counts,
         int dtype, int op, Stream stream) {
        const auto t = code_of<DataType>(dtype, "dtype");
        const auto r = code_of<ReduceOp>(op, "op");
        on_stream(stream, [&](auto... s) {
          comm->reduce_scatterv(in_ptr(in), out_ptr(out), counts, t, r, s...);
        });
      },
      rel);
  c.def(
      "gather",
      [](Comm& comm, std::uintptr_t in, std::uintptr_t out, std::size_t count, int dtype, int root,
         Stream stream) {
        const auto t = code_of<DataType>(dtype, "dtype");
        on_stream(stream,
                  [&](auto... s) { comm->gather(in_ptr(in), out_ptr(out), count, t, root, s...); });
      },
      rel);
  c.def(
      "scatter",
      [](Comm& comm, std::uintptr_t in, std::uintptr_t out, std::size_t count, int dtype, int root,
         Stream stream) {
        const auto t = code_of<DataType>(dtype, "dtype");
        on_stream(stream, [&](auto... s) {
          comm->scatter(in_ptr(in), out_ptr(out), count, t, root, s...);
        });
      },
      rel);
  c.def(
      "reduce",
      [](Comm& comm, std::uintptr_t in, std::uintptr_t out, std::size_t count, int dtype, int op,
         int root, Stream stream) {
        const auto t = code_of<DataType>(dtype, "dtype");
        const auto r = code_of<ReduceOp>(op, "op");
        on_stream(stream, [&](auto... s) {
          comm->reduce(in_ptr(in), out_ptr(out), count, t, r, root, s...);
        });
      },
      rel);
}

// Point-to-point: isend / irecv return the request wait() takes; a stream (kCuda) enqueues.
void bind_messages(py::class_<Comm>& c) {
  auto rel = py::call_guard<py::gil_scoped_release>();
  c.def(
      "isend",
      [](Comm& comm, std::uintptr_t buf, std::size_t count, int dtype, int peer, int tag,
         Stream stream) {
        const auto t = code_of<DataType>(dtype, "dtype");
        if (stream) {
          return comm->isend(in_ptr(buf), count, t, peer, tag,
                             reinterpret_cast<CudaStream>(*stream));
        }
        return comm->isend(in_ptr(buf), count, t, peer, tag);
      },
      rel);
  c.def(
      "irecv",
      [](Comm& comm, std::uintptr_t buf, std::size_t count, int dtype, int peer, int tag,
         Stream stream) {
        const auto t = code_of<DataType>(dtype, "dtype");
        if (stream) {
          return comm->irecv(out_ptr(buf), count, t, peer, tag,
                             reinterpret_cast<CudaStream>(*stream));
        }
        return comm->irecv(out_ptr(buf), count, t, peer, tag);
      },
      rel);
  c.def(
      "irecv_any",
      [](Comm& comm, std::uintptr_t buf, std::size_t count, int dtype, int tag) {
        return comm->irecv_any(out_ptr(buf), count, code_of<DataType>(dtype, "dtype"), tag);
      },
      rel);
  // Returns the message's peer (the sender of an irecv_any).
  c.def(
      "wait", [](Comm& comm, std::uint64_t request) { return comm->wait(request); }, rel);
}

void bind_collectives(py::class_<Comm>& c) {
  auto rel = py::call_guard<py::gil_scoped_release>();
  c.def(
      "all_reduce",
      [](Comm& comm, std::uintptr_t in, std::uintptr_t out, std::size_t count, int dtype, int op,
         Stream stream) {
        const auto t = code_of<DataType>(dtype, "dtype");
        const auto r = code_of<ReduceOp>(op, "op");
        on_stream(stream, [&](auto... s) {
          comm->all_reduce(in_ptr(in), out_ptr(out), count, t, r, s...);
        });
      },
      rel);
  c.def(
      "all_gather",
      [](Comm& comm, std::uintptr_t in, std::uintptr_t out, std::size_t count, int dtype,
         Stream stream) {
        const auto t = code_of<DataType>(dtype, "dtype");
        on_stream(stream,
                  [&](auto... s) { comm->all_gather(in_ptr(in), out_ptr(out), count, t, s...); });
      },
      rel);
  c.def(
      "reduce_scatter",
      [](Comm& comm, std::uintptr_t in, std::uintptr_t out, std::size_t count, int dtype, int op,
         Stream stream) {
        const auto t = code_of<DataType>(dtype, "dtype");
        const auto r = code_of<ReduceOp>(op, "op");
        on_stream(stream, [&](auto... s) {
          comm->reduce_scatter(in_ptr(in), out_ptr(out), count, t, r, s...);
        });
      },
      rel);
  c.def(
      "broadcast",
      [](Comm& comm, std::uintptr_t buf, std::size_t count, int dtype, int root, Stream stream) {
        const auto t = code_of<DataType>(dtype, "dtype");
        on_stream(stream, [&](auto... s) { comm->broadcast(out_ptr(buf), count, t, root, s...); });
      },
      rel);
  c.def(
      "barrier", [](Comm& comm) { comm->barrier(); }, rel);
  bind_exchanges(c);
  bind_messages(c);
  bind_norm(c);
}

void bind_group_calls(py::class_<Comm>& c) {
  auto rel = py::call_guard<py::gil_scoped_release>();
  c.def(
      "allocate",
      [](Comm& comm, std::size_t bytes) {
        void* p = comm->allocate(bytes);
        return RegisteredMemory(comm->keep_mapped(p), bytes);
      },
      rel);
  c.def(
      "free", [](Comm& comm, std::uintptr_t p) { comm->free(reinterpret_cast<void*>(p)); }, rel);
  // Collective, after CUDA-graph capture (communicator.hpp): how many captured input buffers
  // replays now read in place. A kCpu communicator has no captured calls: 0.
  c.def(
      "register_graph_buffers", [](Comm& comm) { return comm->register_graph_buffers(); }, rel);
  c.def(
      "split",
      [](Comm& comm, int color, int key) -> std::optional<Comm> {
        auto sub = comm->split(color, key);
        if (!sub) return std::nullopt;
        return Comm(std::move(sub));
      },
      rel);
}

void bind_plan(py::class_<Comm>& c) {
  // Seconds per stage of staged calls (Communicator::stage_times); {} where none is staged.
  c.def("stage_times", [](Comm& comm) {
    py::dict out;
    for (const auto& s : comm->stage_times()) {
      out[py::str(s.name)] = std::chrono::duration<double>(s.total).count();
    }
    return out;
  });
  // (collective, "backend/algorithm" or "store", calls, bytes) per route used
  // (Communicator::stats); Python's Communicator.stats() makes the dict.
  c.def("stats", [](Comm& comm) {
    py::list out;
    for (const auto& r : comm->stats()) {
      const std::string route =
          r.backend ? fmt::format("{}/{}", to_string(*r.backend), to_string(*r.algorithm))
                    : std::string("store");
      out.append(py::make_tuple(std::string(to_string(r.collective)), route, r.calls, r.bytes));
    }
    return out;
  });
  c.def("reset_stats", [](Comm& comm) { comm->reset_stats(); });
  c.def("plan_json", [](Comm& comm) { return plan_to_json(comm->plan()); });
  c.def("plan_text", [](Comm& comm) { return plan::plan_text(comm->facts(), comm->plan()); });
  // `mode`: the size table of eager calls or of calls captured in a CUDA graph (a kCpu
  // communicator has only its own mode's: the other is an error that says so).
  c.def(
      "route",
      [](Comm& comm, const std::string& op, std::uint64_t input_bytes, const std::string& dtype,
         const std::string& mode) {
        const TableRow row =
            comm->route(parse<Op>(op, "op"), input_bytes, parse<DataType>(dtype, "dtype"),
                        parse<Mode>(mode, "mode"));
        return py::make_tuple(std::string(to_string(row.backend)),
                              std::string(to_string(row.algorithm)));
      },
      py::arg("op"), py::arg("input_bytes"), py::arg("dtype"), py::arg("mode") = "eager");
}

}  // namespace

void bind_communicator(py::module_& m) {
  m.attr("DTYPE_CODES") = codes_of<DataType>();
  m.attr("OP_CODES") = codes_of<ReduceOp>();
  py::class_<Host>(m, "StoreHost")
      .def(py::init<const std::string&>(), py::arg("host"))
      .def_property_readonly("address", &Host::address);
  bind_registered_memory(m);
  py::class_<Comm> c(m, "Comm");
  c.def_static(
      "from_env",
      [](double timeout_s, const std::string& device, int cuda_device, std::optional<int> threads,
         bool caller_serves_fallback, std::optional<bool> deterministic) {
        py::gil_scoped_release release;
        auto bootstrap = bootstrap_from_environment(deadline_of(timeout_s));
        return Comm(Communicator::create(std::move(bootstrap),
                                         options_of(timeout_s, device, cuda_device, threads,
                                                    caller_serves_fallback, deterministic)));
      },
      py::arg("timeout"), py::arg("device"), py::arg("cuda_device"),
      py::arg("threads") = std::nullopt, py::arg("caller_serves_fallback") = false,
      py::arg("deterministic") = std::nullopt);
  c.def_static(
      "from_address",
      [](const std::string& address, int rank, int size, double timeout_s,
         const std::string& device, int cuda_device, Host* host, std::optional<int> threads,
         bool caller_serves_fallback, std::optional<bool> deterministic) {
        std::unique_ptr<StoreHost> owned = host ? host->take() : nullptr;
        py::gil_scoped_release release;
        auto bootstrap =
            bootstrap_from_address(address, rank, size, deadline_of(timeout_s), std::move(owned));
        return Comm(Communicator::create(std::move(bootstrap),
                                         options_of(timeout_s, device, cuda_device, threads,
                                                    caller_serves_fallback, deterministic)));
      },
      py::arg("address"), py::arg("rank"), py::arg("size"), py::arg("timeout"), py::arg("device"),
      py::arg("cuda_device"), py::arg("host") = nullptr, py::arg("threads") = std::nullopt,
      py::arg("caller_serves_fallback") = false, py::arg("deterministic") = std::nullopt);
  // Readable after close(), as the C++ Communicator's.
  c.def_property_readonly("rank", [](Comm& comm) { return comm->rank(); });
  c.def_property_readonly("size", [](Comm& comm) { return comm->size(); });
  c.def_property_readonly("cuda_device", [](Comm& comm) { return comm->cuda_device(); });
  c.def_property_readonly("closed", [](Comm& comm) { return comm->closed(); });
  c.def_property_readonly("aborted", [](Comm& comm) { return comm->aborted(); });
  c.def(
      "abort", [](Comm& comm, const std::string& why) { comm->abort(why); },
      py::call_guard<py::gil_scoped_release>());
  // Ends a call in flight first, with the GIL released: the call may need it to end (a Python
  // log sink).
  c.def(
      "close", [](Comm& comm) { comm->close(); }, py::call_guard<py::gil_scoped_release>());
  bind_collectives(c);
  bind_group_calls(c);
  bind_plan(c);
}

}  // namespace tpcomm::python
