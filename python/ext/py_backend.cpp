// Backends written in Python (torch's Backend.register_backend with a Python
// creator): the creator makes an object per group and rank, and each
// operation of such a group calls that object's method of torch's name
// (allreduce, broadcast, allgather, ...) with NumPy views of the operation's
// CPU tensors and an options object with torch's field names. What the
// method returns is waited for (its wait()) before the operation returns:
// the views are only valid during the call.
#include <pybind11/chrono.h>
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <tdist/backend.h>
#include <tdist/errors.h>
#include <tdist/future.h>

#include "common.h"

namespace tdist_py {
namespace {

using tdist::Operation;
using tdist::OpKind;
using tdist::Tensor;

// A Work that is over: the Python method has returned and its work waited on.
class FinishedWork : public tdist::Work {
 public:
  FinishedWork(std::string op, std::vector<Tensor> outputs, int source)
      : op_(std::move(op)), outputs_(std::move(outputs)), source_(source) {}
  bool is_completed() const override { return true; }
  bool is_success() const override { return true; }
  std::exception_ptr exception() const override { return nullptr; }
  bool wait(std::chrono::milliseconds) override { return true; }
  int source_rank() const override { return source_; }
  std::shared_ptr<tdist::Future> get_future() override {
    auto f = std::make_shared<tdist::Future>();
    f->mark_completed(outputs_);
    return f;
  }
  const std::vector<Tensor>& result() const override { return outputs_; }
  const std::string& op_name() const override { return op_; }
  uint64_t sequence_number() const override { return 0; }

 private:
  std::string op_;
  std::vector<Tensor> outputs_;
  int source_;
};

// The NumPy dtype of a tdist dtype; bfloat16, which NumPy lacks, as its bits (uint16).
py::dtype numpy_dtype(tdist::DType t) {
  switch (t) {
    case tdist::DType::Bool: return py::dtype("?");
    case tdist::DType::UInt8: return py::dtype("u1");
    case tdist::DType::Int8: return py::dtype("i1");
    case tdist::DType::Int16: return py::dtype("i2");
    case tdist::DType::Int32: return py::dtype("i4");
    case tdist::DType::Int64: return py::dtype("i8");
    case tdist::DType::Float16: return py::dtype("f2");
    case tdist::DType::BFloat16: return py::dtype("u2");
    case tdist::DType::Float32: return py::dtype("f4");
    case tdist::DType::Float64: return py::dtype("f8");
    case tdist::DType::Complex64: return py::dtype("c8");
    case tdist::DType::Complex128: return py::dtype("c16");
  }
  throw tdist::DistValueError("a Python backend got a tensor of an unknown dtype");
}

// A writable NumPy view of a CPU tensor's memory (valid during the call only).
py::array view(const Tensor& t) {
  // A base object makes NumPy leave the memory alone (it owns nothing).
  return py::array(numpy_dtype(t.dtype()), t.shape(), {}, t.data(), py::none());
}

py::list views(std::span<const Tensor> ts) {
  py::list out;
  for (const auto& t : ts) out.append(view(t));
  return out;
}

// torch's options objects, with their field names (AllreduceOptions.reduceOp, ...).
py::object options(const py::dict& fields) { return py::module_::import("types").attr("SimpleNamespace")(**fields); }

// Drops a Python reference from any thread; at interpreter exit (the registry
// and the groups may outlive Python) it is left, as the process is ending.
void drop_reference(py::object& obj) {
#if PY_VERSION_HEX >= 0x030D0000
  const bool finalizing = Py_IsFinalizing();
#else
  const bool finalizing = _Py_IsFinalizing();
#endif
  if (!Py_IsInitialized() || finalizing) {
    obj.release();
    return;
  }
  py::gil_scoped_acquire gil;
  obj = py::object();
}

class PyBackend : public tdist::Backend {
 public:
  PyBackend(int rank, int size, std::string name, py::object impl)
      : Backend(rank, size), name_(std::move(name)), impl_(std::move(impl)) {}
  ~PyBackend() override { drop_reference(impl_); }

  std::string name() const override { return name_; }

  std::shared_ptr<tdist::Work> send(const Operation& op) override {
    return call(op, "send", [&] { return py::make_tuple(views(op.inputs), op.peer, op.tag); });
  }
  std::shared_ptr<tdist::Work> recv(const Operation& op) override {
    if (op.peer == tdist::kAnySource)
      return call(op, "recv_anysource", [&] { return py::make_tuple(views(op.inputs), op.tag); });
    return call(op, "recv", [&] { return py::make_tuple(views(op.inputs), op.peer, op.tag); });
  }
  std::shared_ptr<tdist::Work> broadcast(const Operation& op) override {
    return call(op, "broadcast", [&] {
      return py::make_tuple(views(op.inputs), options(py::dict(py::arg("rootRank") = op.root, py::arg("rootTensor") = 0,
                                                              py::arg("timeout") = op.timeout)));
    });
  }
  std::shared_ptr<tdist::Work> all_reduce(const Operation& op) override {
    return call(op, "allreduce", [&] { return py::make_tuple(views(op.inputs), reduce_options(op)); });
  }
  std::shared_ptr<tdist::Work> all_reduce_coalesced(const Operation& op) override {
    if (!has("allreduce_coalesced")) return Backend::all_reduce_coalesced(op);
    return call(op, "allreduce_coalesced", [&] { return py::make_tuple(views(op.inputs), reduce_options(op)); });
  }
  std::shared_ptr<tdist::Work> barrier(const Operation& op) override {
    return call(op, "barrier", [&] { return py::make_tuple(options(py::dict(py::arg("timeout") = op.timeout))); });
  }
  std::shared_ptr<tdist::Work> reduce(const Operation& op) override {
    return call(op, "reduce", [&] {
      return py::make_tuple(views(op.inputs), options(py::dict(py::arg("reduceOp") = op.reduce_op,
                                                              py::arg("rootRank") = op.root, py::arg("rootTensor") = 0,
                                                              py::arg("timeout") = op.timeout)));
    });
  }
  std::shared_ptr<tdist::Work> all_gather(const Operation& op) override {
    return call(op, "allgather", [&] {
      py::list outputs;
      outputs.append(views(op.outputs));
      return py::make_tuple(outputs, views(op.inputs), timeout_options(op));
    });
  }
  std::shared_ptr<tdist::Work> all_gather_into_tensor(const Operation& op) override {
    return call(op, "_allgather_base",
                [&] { return py::make_tuple(view(op.output()), view(op.tensor()), timeout_options(op)); });
  }
  std::shared_ptr<tdist::Work> gather(const Operation& op) override {
    return call(op, "gather", [&] {
      py::list outputs;
      if (!op.outputs.empty()) outputs.append(views(op.outputs));
      return py::make_tuple(outputs, views(op.inputs), root_options(op));
    });
  }
  std::shared_ptr<tdist::Work> scatter(const Operation& op) override {
    return call(op, "scatter", [&] {
      py::list inputs;
      if (!op.inputs.empty()) inputs.append(views(op.inputs));
      return py::make_tuple(views(op.outputs), inputs, root_options(op));
    });
  }
  std::shared_ptr<tdist::Work> reduce_scatter(const Operation& op) override {
    return call(op, "reduce_scatter", [&] {
      py::list inputs;
      inputs.append(views(op.inputs));
      return py::make_tuple(views(op.outputs), inputs, reduce_options(op));
    });
  }
  std::shared_ptr<tdist::Work> reduce_scatter_tensor(const Operation& op) override {
    return call(op, "_reduce_scatter_base",
                [&] { return py::make_tuple(view(op.output()), view(op.tensor()), reduce_options(op)); });
  }
  std::shared_ptr<tdist::Work> all_to_all(const Operation& op) override {
    return call(op, "alltoall",
                [&] { return py::make_tuple(views(op.outputs), views(op.inputs), timeout_options(op)); });
  }
  std::shared_ptr<tdist::Work> all_to_all_single(const Operation& op) override {
    return call(op, "alltoall_base", [&] {
      std::vector<int64_t> out(op.output_split_sizes.begin(), op.output_split_sizes.end());
      std::vector<int64_t> in(op.input_split_sizes.begin(), op.input_split_sizes.end());
      return py::make_tuple(view(op.output()), view(op.tensor()), out, in, timeout_options(op));
    });
  }

 private:
  bool has(const char* method) {
    py::gil_scoped_acquire gil;
    return py::hasattr(impl_, method);
  }
  py::object reduce_options(const Operation& op) {
    return options(py::dict(py::arg("reduceOp") = op.reduce_op, py::arg("timeout") = op.timeout));
  }
  py::object root_options(const Operation& op) {
    return options(py::dict(py::arg("rootRank") = op.root, py::arg("timeout") = op.timeout));
  }
  py::object timeout_options(const Operation& op) { return options(py::dict(py::arg("timeout") = op.timeout)); }

  // Calls impl.<method>(*args()) and waits for the work it returns (None: done).
  template <typename Args>
  std::shared_ptr<tdist::Work> call(const Operation& op, const char* method, Args args) {
    const std::string where = "backend '" + name_ + "' (Python), rank " + std::to_string(rank()) + ": " + op.name();
    if (op.device.type != tdist::DeviceType::CPU)
      throw tdist::DistValueError(where + ": a Python backend gets CPU tensors only, not " + op.device.str());
    int source = op.peer;
    {
      py::gil_scoped_acquire gil;
      try {
        if (!py::hasattr(impl_, method))
          throw tdist::DistBackendError(where + ": the backend object (" +
                                        py::str(py::type::of(impl_)).cast<std::string>() + ") has no method " +
                                        method + "()");
        py::object result = impl_.attr(method)(*args());
        if (!result.is_none() && py::hasattr(result, "wait")) {
          py::object ok = result.attr("wait")();
          if (!ok.is_none() && !ok.cast<bool>())
            throw tdist::DistBackendError(where + ": " + method + "()'s work reported failure (wait() returned False)");
          if (op.kind == OpKind::Recv && op.peer == tdist::kAnySource && py::hasattr(result, "_source_rank"))
            source = result.attr("_source_rank")().cast<int>();
        }
      } catch (py::error_already_set& e) {
        throw tdist::DistBackendError(where + ": " + method + "() raised " + e.what());
      }
    }
    std::vector<Tensor> outputs(op.outputs.begin(), op.outputs.end());
    if (outputs.empty()) outputs.assign(op.inputs.begin(), op.inputs.end());
    return std::make_shared<FinishedWork>(op.name(), std::move(outputs), source);
  }

  std::string name_;
  py::object impl_;
};

}  // namespace

void bind_py_backend(py::module_& m) {
  m.def("_register_python_backend",
        [](const std::string& name, py::function creator, const std::vector<std::string>& devices) {
          std::vector<tdist::DeviceType> types;
          for (const auto& d : devices) {
            auto t = tdist::parse_device_type(d);
            if (!t) throw tdist::DistValueError("register_backend('" + name + "'): unknown device type '" + d +
                                                "' (known: " + tdist::device_type_names() + ")");
            if (*t != tdist::DeviceType::CPU)
              throw tdist::DistValueError("register_backend('" + name + "'): a backend written in Python serves "
                                          "cpu tensors only here (the tdist module passes NumPy views), not " + d);
            types.push_back(*t);
          }
          // The creator lives as long as the registry keeps the factory.
          std::shared_ptr<py::object> holder(new py::object(std::move(creator)), [](py::object* f) {
            drop_reference(*f);
            delete f;
          });
          tdist::register_backend(
              name,
              [holder, name](const std::shared_ptr<tdist::Store>& store, int rank, int size,
                             const tdist::BackendOptions& options) -> std::shared_ptr<tdist::Backend> {
                py::gil_scoped_acquire gil;
                py::object impl;
                try {
                  impl = (*holder)(store, rank, size, options.timeout);
                } catch (py::error_already_set& e) {
                  throw tdist::DistBackendError("backend '" + name + "' (Python): its creator raised on rank " +
                                                std::to_string(rank) + " of group " + options.group_name + ": " +
                                                e.what());
                }
                if (impl.is_none())
                  throw tdist::DistBackendError("backend '" + name + "' (Python): its creator returned None on rank " +
                                                std::to_string(rank) + " of group " + options.group_name);
                return std::make_shared<PyBackend>(rank, size, name, std::move(impl));
              },
              std::move(types));
        },
        py::arg("name"), py::arg("creator"), py::arg("devices"),
        "Registers a backend whose creator(store, rank, world_size, timeout) makes the object whose methods carry "
        "the operations (tdist.Backend.register_backend).");
  m.def("_is_backend_registered", &tdist::is_backend_available, py::arg("name"),
        "Whether init_process_group/new_group know a backend of this name (built-in or registered).");
}

}  // namespace tdist_py
