// C++ tdist::DistError and subclasses -> tdist.DistError (a RuntimeError, as in
// torch) > DistBackendError, DistNetworkError, DistStoreError, and
// DistValueError, which is also a ValueError so that `except ValueError` works
// for bad arguments, and QueueEmptyError (torch.distributed.QueueEmptyError), a
// DistStoreError. Messages are passed through unchanged.
#include "errors.h"

#include <tdist/errors.h>

namespace tdist_py {
namespace {

// Owned by the module (set as its attributes); these pointers are borrowed.
PyObject* g_dist_error = nullptr;
PyObject* g_backend_error = nullptr;
PyObject* g_network_error = nullptr;
PyObject* g_store_error = nullptr;
PyObject* g_value_error = nullptr;
PyObject* g_queue_empty_error = nullptr;

// The Python type for the C++ exception currently being handled (rethrown by the caller).
PyObject* type_of(std::exception_ptr error, std::string* message) {
  try {
    std::rethrow_exception(error);
  } catch (const tdist::DistValueError& e) {
    *message = e.what();
    return g_value_error;
  } catch (const tdist::DistBackendError& e) {
    *message = e.what();
    return g_backend_error;
  } catch (const tdist::DistNetworkError& e) {
    *message = e.what();
    return g_network_error;
  } catch (const tdist::DistQueueEmptyError& e) {
    *message = e.what();
    return g_queue_empty_error;
  } catch (const tdist::DistStoreError& e) {
    *message = e.what();
    return g_store_error;
  } catch (const tdist::DistError& e) {
    *message = e.what();
    return g_dist_error;
  } catch (const std::exception& e) {
    *message = e.what();
    return PyExc_RuntimeError;
  } catch (...) {
    *message = "unknown C++ exception";
    return PyExc_RuntimeError;
  }
}

PyObject* new_type(py::module_& m, const char* name, PyObject* bases, const char* doc) {
  std::string full = std::string("tdist.") + name;
  PyObject* type = PyErr_NewExceptionWithDoc(full.c_str(), doc, bases, nullptr);
  if (type == nullptr) throw py::error_already_set();
  m.add_object(name, py::handle(type));  // the module now holds a reference
  Py_DECREF(type);
  return type;
}

}  // namespace

py::object exception_object(std::exception_ptr error) {
  if (!error) return py::none();
  std::string message;
  PyObject* type = type_of(error, &message);
  return py::reinterpret_borrow<py::object>(type)(message);
}

void throw_as_cpp_if_dist_error(py::error_already_set& e) {
  if (!g_dist_error || !e.matches(g_dist_error)) return;
  std::string message = py::str(e.value()).cast<std::string>();
  if (e.matches(g_queue_empty_error)) throw tdist::DistQueueEmptyError(message);
  if (e.matches(g_store_error)) throw tdist::DistStoreError(message);
  if (e.matches(g_value_error)) throw tdist::DistValueError(message);
  if (e.matches(g_network_error)) throw tdist::DistNetworkError(message);
  if (e.matches(g_backend_error)) throw tdist::DistBackendError(message);
  throw tdist::DistError(message);
}

void bind_errors(py::module_& m) {
  g_dist_error = new_type(m, "DistError", PyExc_RuntimeError,
                          "Base of tdist's errors (torch.distributed.DistError); a RuntimeError.");
  py::tuple one(1);
  one[0] = py::handle(g_dist_error);
  g_backend_error = new_type(m, "DistBackendError", one.ptr(),
                             "A point-to-point or collective operation failed (timeout, peer error, mismatch).");
  g_network_error = new_type(m, "DistNetworkError", one.ptr(), "A connection could not be made, or broke.");
  g_store_error = new_type(m, "DistStoreError", one.ptr(),
                           "A key-value store operation failed (missing key after the timeout, ...).");
  py::tuple store_base(1);
  store_base[0] = py::handle(g_store_error);
  g_queue_empty_error = new_type(m, "QueueEmptyError", store_base.ptr(),
                                 "A non-blocking Store.queue_pop found the queue empty (a DistStoreError).");
  py::tuple two(2);
  two[0] = py::handle(g_dist_error);
  two[1] = py::handle(PyExc_ValueError);
  g_value_error = new_type(m, "DistValueError", two.ptr(),
                           "An invalid argument (rank, dtype/op combination, size); also a ValueError. "
                           "Raised before anything is sent: the group stays usable.");

  py::register_exception_translator([](std::exception_ptr p) {
    if (!p) return;
    try {
      std::rethrow_exception(p);
    } catch (const tdist::DistError&) {
      std::string message;
      PyObject* type = type_of(std::current_exception(), &message);
      PyErr_SetString(type, message.c_str());
    }
    // Anything else propagates to pybind11's own translators.
  });
}

}  // namespace tdist_py
