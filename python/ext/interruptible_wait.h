// Waiting for an operation so that Ctrl-C ends the wait. Python runs its
// signal handlers (SIGINT: raise KeyboardInterrupt) only when C code asks,
// and a wait with the GIL released lasts up to the group timeout (30 minutes
// by default): so the wait goes in short slices, and between them the main
// thread runs the handlers. A handler that raises fails the operation's group
// through the group's own failure path (ProcessGroup::abort): the operation
// ends, the peers are told, and every later call on the group fails at once
// saying it was interrupted. Then the handler's exception propagates.
//
// Header-only: shared by the _tdist extension and the PyTorch plugin
// (_tdist_torch), two modules that share no object code.
#pragma once

#include <pybind11/pybind11.h>
#include <pythread.h>

#include <chrono>
#include <memory>
#include <string>

#include <tdist/errors.h>
#include <tdist/process_group.h>
#include <tdist/work.h>

namespace tdist_py {

// How long a wait goes without looking for signals: well under the "fraction
// of a second" a user waits for Ctrl-C, and a wake-up this rare costs nothing.
inline constexpr std::chrono::milliseconds kSignalCheckEvery{50};

// The Python main thread, the only one that runs signal handlers; set when the
// module is imported (remember_main_thread). 0: unknown, never check.
inline unsigned long& main_thread_ident() {
  static unsigned long ident = 0;
  return ident;
}

// Call with the GIL, at import.
inline void remember_main_thread() {
  namespace py = pybind11;
  main_thread_ident() = py::module_::import("threading").attr("main_thread")().attr("ident").cast<unsigned long>();
}

// "rank 0 in group default_pg: all_reduce #3" (the C++ library's labels).
inline std::string describe_operation(const tdist::ProcessGroup& group, const tdist::Work& work) {
  std::string rank = group.is_member() ? std::to_string(group.global_rank(group.rank())) : std::string("?");
  return "rank " + rank + " in group " + group.group_name() + ": " + work.op_name() + " #" +
         std::to_string(work.sequence_number());
}

// The error of a wait for `what` ("rank 0 in group default_pg: all_reduce #3") that `timeout` ended first.
[[noreturn]] inline void throw_wait_timed_out(const std::string& what, std::chrono::milliseconds timeout) {
  throw tdist::DistBackendError(what + ": Work::wait: Timed out after " + std::to_string(timeout.count()) +
                                " ms (the operation is still in progress)");
}

// Fails `group` because `work` was interrupted by the Python exception `raised` (its type's name).
inline void fail_interrupted(tdist::ProcessGroup& group, const tdist::Work& work, const std::string& raised) {
  auto cause = std::make_exception_ptr(tdist::DistBackendError(
      describe_operation(group, work) + " was interrupted by " + raised +
      " (a signal such as Ctrl-C) while it waited: the group is failed, and its operations fail from now on "
      "(destroy_process_group() and init_process_group() again, or end the process)"));
  group.abort(cause);
}

// Waits for `work` (without the GIL: call it with the GIL released) up to
// `timeout` (kNoTimeout: as long as the operation takes; it has its own
// deadline). Returns true once it completed successfully; rethrows its error;
// returns false when `timeout` passed first. On the main thread, a signal
// handler that raises (KeyboardInterrupt) makes `on_interrupt(raised type
// name)` run, without the GIL (it fails the group: fail_interrupted), and its
// exception is thrown as pybind11::error_already_set (raised in Python as it is).
template <typename OnInterrupt>
bool wait_interruptibly(tdist::Work& work, std::chrono::milliseconds timeout, OnInterrupt&& on_interrupt) {
  namespace py = pybind11;
  using clock = std::chrono::steady_clock;
  const bool checks = main_thread_ident() != 0 && PyThread_get_thread_ident() == main_thread_ident();
  const bool bounded = timeout != tdist::kNoTimeout;
  const clock::time_point deadline = bounded ? clock::now() + timeout : clock::time_point::max();
  for (;;) {
    std::chrono::milliseconds slice = checks ? kSignalCheckEvery : timeout;
    if (bounded) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
      if (left < slice) slice = std::max(left, std::chrono::milliseconds(0));
    }
    bool completed = false;
    try {
      work.wait(slice);
      return true;
    } catch (const tdist::DistError&) {
      // The operation's error, or this slice's timeout; it may have completed
      // since the latter was thrown.
      completed = work.completed_now();
    }
    if (completed) {
      work.wait();  // returns, or throws the operation's own error
      return true;
    }
    if (bounded && clock::now() >= deadline) return false;
    if (!checks) continue;
    std::string raised;
    std::unique_ptr<py::error_already_set> error;
    {
      py::gil_scoped_acquire gil;
      if (PyErr_CheckSignals() == 0) continue;
      error = std::make_unique<py::error_already_set>();  // takes the handler's exception
      raised = py::str(error->type().attr("__name__")).cast<std::string>();
    }
    if (!work.completed_now()) {
      try {
        on_interrupt(raised);
      } catch (...) {
        // Failing the group is best effort: the user's exception goes first.
      }
    }
    throw *error;
  }
}

}  // namespace tdist_py
