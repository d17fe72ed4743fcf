// tdist.Work, the handle of an async operation, as a type of CPython's C API
// rather than a class bound by pybind11: a loop of async calls makes one and
// frees it at every iteration, and a pybind11 instance costs about 2000
// instructions to make and free (its registry of instances, a holder made
// apart), a fifth of `all_reduce(a, async_op=True).wait()` at 8 bytes
// (docs/performance.md). Here the handle lives inside the Python object. The
// methods do what work.cpp says; C++ exceptions are raised as pybind11's
// translators raise them.
#include <chrono>
#include <new>
#include <optional>
#include <string>
#include <type_traits>

#include "args.h"
#include "errors.h"
#include "fast_entry.h"
#include "work.h"

namespace tdist_py {
namespace {

struct WorkObject {
  PyObject_HEAD
  alignas(PyWork) unsigned char storage[sizeof(PyWork)];
};

PyTypeObject* g_work_type = nullptr;  // the type; never freed (the module is never unloaded)

PyWork& handle_of(PyObject* self) {
  return *std::launder(reinterpret_cast<PyWork*>(reinterpret_cast<WorkObject*>(self)->storage));
}

// `body`'s py::object as a new reference, or null with the Python error set.
template <typename Body>
PyObject* returned(Body&& body) {
  return guarded([&] { return body().release().ptr(); });
}

void work_dealloc(PyObject* self) {
  PyTypeObject* type = Py_TYPE(self);
  handle_of(self).~PyWork();  // with the GIL: parks the arrays of an operation still going on
  type->tp_free(self);
  Py_DECREF(type);  // an instance of a heap type holds a reference to it
}

PyObject* work_repr(PyObject* self) {
  return returned([&] {
    const tdist::Work& w = *handle_of(self).work();
    return py::str("<tdist.Work " + w.op_name() + " #" + std::to_string(w.sequence_number()) +
                   (w.completed_now() ? " completed>" : " pending>"));
  });
}

// wait(timeout=None): positional or by keyword. What pybind11 would refuse is
// refused with the TypeError CPython's own functions raise.
PyObject* work_wait(PyObject* self, PyObject* const* args, Py_ssize_t nargsf, PyObject* kwnames) {
  const Py_ssize_t n = PyVectorcall_NARGS(nargsf);
  if (n > 1) {
    PyErr_Format(PyExc_TypeError, "wait() takes at most 1 argument (%zd given)", n);
    return nullptr;
  }
  PyObject* timeout = n == 1 ? args[0] : nullptr;
  if (kwnames != nullptr)
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(kwnames); ++k) {
      PyObject* name = PyTuple_GET_ITEM(kwnames, k);
      if (!PyUnicode_Check(name) || PyUnicode_CompareWithASCIIString(name, "timeout") != 0) {
        PyErr_Format(PyExc_TypeError, "wait() got an unexpected keyword argument '%S'", name);
        return nullptr;
      }
      if (timeout != nullptr) {
        PyErr_SetString(PyExc_TypeError, "wait() got multiple values for argument 'timeout'");
        return nullptr;
      }
      timeout = args[n + k];
    }
  return returned([&] {
    std::optional<std::chrono::milliseconds> limit;
    if (timeout != nullptr && timeout != Py_None) limit = to_timeout(timeout, "Work.wait");
    // The arrays stay with this Work, which parks them if dropped while the operation runs.
    const PyWork& h = handle_of(self);
    wait_for(h.work(), h.group(), nullptr, limit.value_or(tdist::kNoTimeout));
    return py::bool_(true);
  });
}

// The methods without arguments: `Body` takes the handle and returns a py::object.
template <typename Body>
PyCFunction no_args(Body) {
  static_assert(std::is_empty_v<Body>, "a captureless lambda");
  return [](PyObject* self, PyObject*) -> PyObject* { return returned([&] { return Body{}(handle_of(self)); }); };
}

PyMethodDef* methods() {
  static PyMethodDef table[] = {
      {"synchronize", no_args([](const PyWork& h) {
         h.work()->synchronize();
         return py::object(py::none());
       }),
       METH_NOARGS,
       "synchronize($self, /)\n--\n\nDevice-ordered completion, as torch's; CPU arrays are complete once wait() "
       "returns: nothing to do."},
      {"wait", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(work_wait)), METH_FASTCALL | METH_KEYWORDS,
       "wait($self, /, timeout=None)\n--\n\nBlocks until the operation completes (GIL released) and raises its "
       "error. With a timeout (datetime.timedelta or seconds), raises DistBackendError naming the operation if it "
       "is not done by then (the operation goes on). Returns True."},
      {"is_completed", no_args([](const PyWork& h) { return py::object(py::bool_(h.work()->is_completed())); }),
       METH_NOARGS,
       "is_completed($self, /)\n--\n\nWhether the operation has completed (successfully or not); never blocks."},
      {"is_success", no_args([](const PyWork& h) { return py::object(py::bool_(h.work()->is_success())); }),
       METH_NOARGS, "is_success($self, /)\n--\n\nWhether the operation completed without error."},
      {"exception", no_args([](const PyWork& h) { return exception_object(h.work()->exception()); }), METH_NOARGS,
       "exception($self, /)\n--\n\nThe error the operation ended with (a DistError), or None."},
      {"source_rank", no_args([](const PyWork& h) { return py::object(py::int_(h.work()->source_rank())); }),
       METH_NOARGS, "source_rank($self, /)\n--\n\nFor irecv from any source: the group rank the message came from."},
      {"_source_rank", no_args([](const PyWork& h) { return py::object(py::int_(h.work()->source_rank())); }),
       METH_NOARGS, "_source_rank($self, /)\n--\n\ntorch's name of source_rank."},
      {"result", no_args([](const PyWork& h) { return py::object(h.keep().outputs()); }), METH_NOARGS,
       "result($self, /)\n--\n\nThe output arrays of the operation (the arrays passed in, written in place)."},
      {"get_future", no_args([](const PyWork& h) { return work_get_future(h); }), METH_NOARGS,
       "get_future($self, /)\n--\n\nA Future completing with the list of output arrays (collectives only; "
       "point-to-point operations have none and raise DistBackendError, as with Gloo)."},
      {"get_future_result", no_args([](const PyWork& h) { return work_get_future_result(h); }), METH_NOARGS,
       "get_future_result($self, /)\n--\n\ntorch's get_future_result: a Future that completes, never with an "
       "error, once the operation has; its value is a tdist.WorkResult: SUCCESS, TIMEOUT (failed at its "
       "deadline) or COMM_ERROR (any other failure). Collectives only, as get_future."},
      {nullptr, nullptr, 0, nullptr},
  };
  return table;
}

}  // namespace

py::object make_work_object(std::shared_ptr<tdist::Work> work, Keep keep, tdist::Group group) {
  PyObject* self = PyType_GenericAlloc(g_work_type, 0);  // takes a reference to the type
  if (self == nullptr) throw py::error_already_set();
  new (reinterpret_cast<WorkObject*>(self)->storage) PyWork(std::move(work), std::move(keep), std::move(group));
  return py::reinterpret_steal<py::object>(self);
}

void bind_work_type(py::module_& m) {
  static PyType_Slot slots[] = {
      {Py_tp_dealloc, reinterpret_cast<void*>(work_dealloc)},
      {Py_tp_repr, reinterpret_cast<void*>(work_repr)},
      {Py_tp_methods, methods()},
      {Py_tp_doc, const_cast<char*>("The handle of an operation started with async_op=True (or isend/irecv). The "
                                    "arrays it uses must not be touched until wait() returns.")},
      {0, nullptr},
  };
  const std::string name = py::str(m.attr("__name__")).cast<std::string>() + ".Work";
  static std::string kept_name;  // the spec's name must outlive the type
  kept_name = name;
  unsigned flags = Py_TPFLAGS_DEFAULT;
#ifdef Py_TPFLAGS_DISALLOW_INSTANTIATION
  flags |= Py_TPFLAGS_DISALLOW_INSTANTIATION;  // no __new__ either (Python 3.10 on)
#endif
  PyType_Spec spec{kept_name.c_str(), static_cast<int>(sizeof(WorkObject)), 0, flags, slots};
  PyObject* type = PyType_FromSpec(&spec);
  if (type == nullptr) throw py::error_already_set();
  // Made only by the operations (as pybind11's class without a constructor).
  reinterpret_cast<PyTypeObject*>(type)->tp_new = nullptr;
  g_work_type = reinterpret_cast<PyTypeObject*>(type);
  m.attr("Work") = py::reinterpret_steal<py::object>(type);
}

}  // namespace tdist_py
