// The extension module tdist._tdist. The public package (python/tdist/__init__.py)
// re-exports these names and adds what is written in Python (spawn, object
// pickling, P2POp, group helpers).
#include "common.h"
#include "interruptible_wait.h"

PYBIND11_MODULE(_tdist, m) {
  m.doc() = "C++ core of the tdist package (torch.distributed's API over NumPy and DLPack)";
  // Errors first: every later binding may raise them.
  tdist_py::bind_errors(m);
  tdist_py::bind_reduce_op(m);
  tdist_py::bind_stores(m);
  tdist_py::bind_work(m);
  tdist_py::bind_groups(m);
  tdist_py::bind_process_group_methods(m);
  tdist_py::bind_p2p(m);
  tdist_py::bind_collectives(m);
  tdist_py::bind_objects(m);
  tdist_py::bind_device_mesh(m);
  tdist_py::bind_trace(m);
  tdist_py::bind_py_backend(m);
  // Blocking waits check for Ctrl-C on this thread only (interruptible_wait.h).
  tdist_py::remember_main_thread();
}
