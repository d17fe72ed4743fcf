// Shared declarations of the _tdist extension: one bind_* function per file.
#pragma once

#include <pybind11/pybind11.h>

namespace py = pybind11;

namespace tdist_py {

void bind_errors(py::module_& m);        // errors.cpp
void bind_reduce_op(py::module_& m);     // reduce_op.cpp
void bind_stores(py::module_& m);        // stores.cpp
void bind_work(py::module_& m);          // work.cpp
void bind_groups(py::module_& m);        // groups.cpp: init, groups, rank helpers
void bind_p2p(py::module_& m);           // p2p.cpp
void bind_collectives(py::module_& m);   // collectives.cpp
void bind_objects(py::module_& m);       // objects.cpp: object collectives on bytes
void bind_device_mesh(py::module_& m);   // device_mesh.cpp
void bind_trace(py::module_& m);         // trace.cpp: flight recorder, operation observers
void bind_py_backend(py::module_& m);    // py_backend.cpp: backends written in Python
void bind_process_group_methods(py::module_& m);  // process_group_methods.cpp: torch's ProcessGroup methods

}  // namespace tdist_py

// Before any use of shared_ptr<Store> from Python: its caster lives there.
#include "py_store.h"
