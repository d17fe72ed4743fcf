// The flight recorder and the operation observers of include/tdist/trace.h.
// python/tdist/trace.py builds the public API on these (op_spans,
// dump_flight_recorder, flight_recorder).
#include <pybind11/stl.h>

#include <memory>
#include <string>

#include <tdist/trace.h>

#include "common.h"

namespace tdist_py {
namespace {

// False once the interpreter is finalizing: a thread that takes the GIL then
// never gets it back (or is ended), and operations can still finish on
// tdist's threads.
bool python_usable() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsInitialized() && !Py_IsFinalizing();
#else
  return Py_IsInitialized() && !_Py_IsFinalizing();
#endif
}

// The Python callable of an observer. The library copies its list of
// observers, so the last reference may go on any thread, without the GIL.
std::shared_ptr<py::function> hold(py::function fn) {
  return std::shared_ptr<py::function>(new py::function(std::move(fn)), [](py::function* p) {
    if (!python_usable()) return;  // the process is ending: leave the reference
    py::gil_scoped_acquire gil;
    delete p;
  });
}

}  // namespace

void bind_trace(py::module_& m) {
  using tdist::OpEvent;
  py::class_<OpEvent>(m, "OpEvent",
                      "One finished operation as the flight recorder holds it (include/tdist/trace.h); "
                      "tdist.op_spans() hands them on as tdist.OpSpan.")
      .def_readonly("group", &OpEvent::group)
      .def_readonly("seq", &OpEvent::seq)
      .def_readonly("op", &OpEvent::op)
      .def_readonly("p2p", &OpEvent::p2p)
      .def_readonly("dtype", &OpEvent::dtype)
      .def_readonly("shapes", &OpEvent::shapes)
      .def_readonly("out_shapes", &OpEvent::out_shapes)
      .def_readonly("bytes", &OpEvent::bytes)
      .def_readonly("root", &OpEvent::root)
      .def_readonly("peer", &OpEvent::peer)
      .def_readonly("reduce_op", &OpEvent::reduce_op)
      .def_readonly("engine", &OpEvent::engine)
      .def_readonly("algorithm", &OpEvent::algorithm)
      .def_readonly("state", &OpEvent::state)
      .def_readonly("error", &OpEvent::error)
      .def_readonly("queued_us", &OpEvent::queued_us)
      .def_readonly("started_us", &OpEvent::started_us)
      .def_readonly("ended_us", &OpEvent::ended_us)
      .def_readonly("time_resolution_us", &OpEvent::time_resolution_us)
      .def("__repr__", [](const OpEvent& e) {
        return "<OpEvent " + e.group + " " + e.op + " #" + std::to_string(e.seq) + " " + e.state + ">";
      });

  m.def(
      "add_op_observer",
      [](py::function observer) {
        auto fn = hold(std::move(observer));
        return tdist::add_op_observer([fn](const OpEvent& event) {
          if (!python_usable()) return;
          py::gil_scoped_acquire gil;
          try {
            // A copy: the event dies when this returns, and the observer may keep it.
            (*fn)(py::cast(event, py::return_value_policy::copy));
          } catch (py::error_already_set& e) {
            // Raising into the thread that finished an operation would be
            // lost there (and could fail a collective's progress): report it
            // as Python reports errors of callbacks it cannot raise into.
            e.discard_as_unraisable("tdist operation observer");
          } catch (const std::exception& e) {
            PyErr_SetString(PyExc_RuntimeError, e.what());
            PyErr_WriteUnraisable(fn->ptr());
          }
        });
      },
      py::arg("observer"),
      "Calls observer(OpEvent) for each operation of every group of this process once it has ended, on "
      "the thread that ended it (with the GIL taken). Returns a handle for remove_op_observer. An "
      "exception of the observer goes to sys.unraisablehook.");
  m.def("remove_op_observer", &tdist::remove_op_observer, py::arg("handle"),
        py::call_guard<py::gil_scoped_release>(),
        "Stops an observer (one that is running on another thread may still finish its call).");
  m.def(
      "dump_flight_recorder",
      [](const std::string& path) { return tdist::dump_flight_recorder(path); }, py::arg("path") = "",
      py::call_guard<py::gil_scoped_release>(),
      "Writes every group's flight recorder to `path`, or to this rank's file under "
      "TDIST_FLIGHT_RECORDER_DIR (or TORCH_FR_DUMP_TEMP_FILE); returns the path written.");
  m.def(
      "flight_recorder_json", [](const std::string& reason) { return tdist::flight_recorder_json(reason); },
      py::arg("reason") = "request", py::call_guard<py::gil_scoped_release>(),
      "Every group's flight recorder as a JSON document (docs/trace_format.md), written nowhere.");
}

}  // namespace tdist_py
