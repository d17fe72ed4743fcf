// A blocking call runs its operation on the caller's thread, as the C++
// API's blocking calls do, instead of handing it to the group's progress
// thread and sleeping until that thread is done: the hand-over (two thread
// wake-ups) is most of a small operation's time, and far more on a loaded
// machine.
//
// Ctrl-C still ends such a call. The main thread cannot run Python's signal
// handler while it is inside the operation, so from the first such call on
// Python's signal wakeup fd is a pipe of ours (signal.set_wakeup_fd: Python's
// C-level handler writes the signal's number there), and a watchdog thread
// blocked on that pipe fails the call's group when SIGINT arrives during one
// (fail_interrupted's message, with the operation's number taken before the
// call). The operation ends with the group's failure; back in Python the
// handler runs and its KeyboardInterrupt is raised.
//
// Where that cannot be done alike, the call keeps the progress thread and
// the sliced wait of interruptible_wait.h: async_op, a SIGINT handler of the
// program's own (it may not raise: the wait must go on), or a wakeup fd that
// someone else set (asyncio's) before the first call. One set after it
// replaces ours, and a blocking call then ends at Ctrl-C only when its
// operation does (or at its timeout). Threads other than the main one never
// run signal handlers: their blocking calls run inline without a watch.
//
// Header-only: shared by the _tdist extension and the PyTorch plugin.
#pragma once

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <pybind11/pybind11.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <exception>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <utility>

#include <tdist/distributed.h>
#include <tdist/errors.h>
#include <tdist/process_group.h>

#include "interruptible_wait.h"

namespace tdist_py {

// The call the watchdog may fail: set (under mu) while a blocking call of
// the main thread runs inline.
struct InlineWatch {
  std::mutex mu;
  tdist::Group group;         // null: nothing runs inline
  const char* op = nullptr;   // "all_reduce"
  uint64_t seq = 0;           // its number, 0 where not known (point-to-point)
  bool fired = false;         // the watchdog failed the group for this call
  int read_fd = -1, write_fd = -1;  // the pipe; -1: not made in this process
  // Python's wakeup fd is write_fd (main thread, GIL held). Once set, it stays
  // set between calls: setting it costs an fstat and an fcntl, and restoring
  // it after every call made those four system calls, about 0.8 µs of a
  // 2.3 µs blocking 8-byte all_reduce on the 2-core VM. Between calls a
  // SIGINT's byte reaches the watchdog with no call armed, which ignores it.
  bool installed = false;
  int parent_fd = -1;  // in a forked child: the parent's write_fd, closed here
};

inline InlineWatch& inline_watch() {
  static auto* watch = new InlineWatch();  // never destroyed: the thread may outlive static destructors
  return *watch;
}

inline void watchdog_loop(int fd) {
  unsigned char signals[64];
  for (;;) {
    const ssize_t n = read(fd, signals, sizeof signals);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the pipe was closed
    if (std::memchr(signals, SIGINT, static_cast<size_t>(n)) == nullptr) continue;  // other signals wait for the call
    tdist::Group group;
    std::string what;
    {
      InlineWatch& w = inline_watch();
      std::lock_guard<std::mutex> lock(w.mu);
      if (!w.group || w.fired) continue;
      w.fired = true;
      group = w.group;
      const std::string rank = group->is_member() ? std::to_string(group->global_rank(group->rank())) : "?";
      what = "rank " + rank + " in group " + group->group_name() + ": " + w.op +
             (w.seq ? " #" + std::to_string(w.seq) : std::string());
    }
    try {
      group->abort(std::make_exception_ptr(tdist::DistBackendError(
          what + " was interrupted by KeyboardInterrupt (a signal such as Ctrl-C) while it waited: the group is "
                 "failed, and its operations fail from now on (destroy_process_group() and init_process_group() "
                 "again, or end the process)")));
    } catch (...) {
      // Failing the group is best effort: the user's KeyboardInterrupt comes anyway.
    }
  }
}

// The pipe and its watchdog, made once per process (a forked child makes its own).
inline bool start_watchdog(InlineWatch& w) {
  if (w.write_fd >= 0) return true;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return false;
  // Python's handler writes without blocking; a full pipe loses only repeats.
  fcntl(fds[1], F_SETFL, fcntl(fds[1], F_GETFL) | O_NONBLOCK);
  try {
    std::thread(watchdog_loop, fds[0]).detach();
  } catch (...) {
    close(fds[0]);
    close(fds[1]);
    return false;
  }
  static const bool forks_handled = [] {
    // The child has no watchdog and must not share the parent's pipe: it
    // starts afresh (the parent's mutex may have been held at the fork).
    pthread_atfork(nullptr, nullptr, [] {
      InlineWatch& w = inline_watch();
      const int r = w.read_fd, wr = w.write_fd;
      const bool installed = w.installed;
      new (&w) InlineWatch();
      if (installed) w.parent_fd = wr;
      if (r >= 0) close(r);
      if (wr >= 0) close(wr);
    });
    // Python's wakeup fd still names the parent's pipe in the child, a closed
    // fd that a later file may reuse: Python code after os.fork() (this hook)
    // unsets it. (A fork outside os.fork() runs no Python hook; a signal's
    // byte then fails to write, and Python reports that.)
    namespace py = pybind11;
    py::module_::import("os").attr("register_at_fork")(py::arg("after_in_child") = py::cpp_function([] {
      InlineWatch& w = inline_watch();
      if (w.parent_fd < 0) return;
      py::module_ signal = py::module_::import("_signal");
      const int current = py::int_(signal.attr("set_wakeup_fd")(-1));
      if (current != w.parent_fd && current != -1) signal.attr("set_wakeup_fd")(current);  // someone else's since
      w.parent_fd = -1;
    }));
    return true;
  }();
  (void)forks_handled;
  w.read_fd = fds[0];
  w.write_fd = fds[1];
  return true;
}

// _signal.getsignal, default_int_handler and set_wakeup_fd (GIL held).
struct SignalModule {
  PyObject* getsignal;
  PyObject* default_int_handler;
  PyObject* set_wakeup_fd;
  PyObject* sigint;
};

inline const SignalModule& signal_module() {
  namespace py = pybind11;
  static const SignalModule m = [] {
    // _signal, not signal: signal.getsignal wraps the answer in an enum,
    // raising and catching an exception for a Python handler (microseconds).
    py::module_ signal = py::module_::import("_signal");
    auto take = [&](const char* name) { return py::object(signal.attr(name)).release().ptr(); };
    return SignalModule{take("getsignal"), take("default_int_handler"), take("set_wakeup_fd"), PyLong_FromLong(SIGINT)};
  }();
  return m;
}

// Whether SIGINT's Python handler is Python's own (it raises KeyboardInterrupt). GIL held.
inline bool sigint_raises() {
  const SignalModule& m = signal_module();
  PyObject* handler = PyObject_CallOneArg(m.getsignal, m.sigint);
  if (handler == nullptr) {
    PyErr_Clear();
    return false;
  }
  const bool ours = handler == m.default_int_handler;
  Py_DECREF(handler);
  return ours;
}

// signal.set_wakeup_fd(fd) (main thread, GIL held): the previous fd, or -2 if it failed.
inline int set_wakeup_fd(int fd) {
  PyObject* arg = PyLong_FromLong(fd);
  PyObject* previous = arg ? PyObject_CallOneArg(signal_module().set_wakeup_fd, arg) : nullptr;
  Py_XDECREF(arg);
  if (previous == nullptr) {
    PyErr_Clear();
    return -2;
  }
  const long old = PyLong_AsLong(previous);
  Py_DECREF(previous);
  return static_cast<int>(old);
}

// One blocking call (construct with the GIL held, on the calling thread).
class InlineCall {
 public:
  // `group`: the call's (null: the default group); `op`: its name; `device`:
  // of its tensors (whose backend numbers it); `point_to_point`: numbered
  // apart from the collectives (the message then names no number).
  InlineCall(const tdist::Group& group, const char* op, tdist::Device device = {}, bool point_to_point = false) {
    arm(group, op, [&](tdist::ProcessGroup& g) -> uint64_t {
      return !point_to_point && g.is_member() ? g.backend_for(device).next_sequence_number() : 0;
    });
  }
  // A wait without a timeout for `work` (of `group`), which may run the
  // operation on this thread (PendingWork::wait): the message names it.
  InlineCall(const tdist::Group& group, const tdist::Work& work) {
    arm(group, work.op_name().c_str(), [&](tdist::ProcessGroup&) { return work.sequence_number(); });
  }
  ~InlineCall() { disarm(); }
  InlineCall(const InlineCall&) = delete;
  InlineCall& operator=(const InlineCall&) = delete;

  // false: issue asynchronously and wait in slices (interruptible_wait.h).
  bool runs_inline() const { return inline_; }

  // Runs `call` (which issues the operation with async_op=false and returns
  // once it is over) without the GIL. A Ctrl-C that failed the group raises
  // its KeyboardInterrupt here, before the operation's own error.
  template <typename Call>
  auto run(Call&& call) -> decltype(call()) {
    std::exception_ptr error;
    decltype(call()) result{};
    {
      pybind11::gil_scoped_release nogil;
      try {
        result = call();
      } catch (...) {
        error = std::current_exception();
      }
    }
    if (finish() && PyErr_CheckSignals() != 0) throw pybind11::error_already_set();
    if (error) std::rethrow_exception(error);
    return result;
  }

  // Ends the watch (GIL held), for callers that run the operation
  // themselves: whether a Ctrl-C failed the group meanwhile.
  bool finish() {
    disarm();
    return fired_;
  }

 private:
  // Arms the watch for `op`, numbered by number_of(group) (0: no number).
  template <typename NumberOf>
  void arm(const tdist::Group& group, const char* op, NumberOf&& number_of) {
    if (main_thread_ident() == 0 || PyThread_get_thread_ident() != main_thread_ident()) {
      inline_ = true;
      return;
    }
    if (!sigint_raises()) return;
    InlineWatch& w = inline_watch();
    if (!start_watchdog(w)) return;
    if (!w.installed) {
      const int previous = set_wakeup_fd(w.write_fd);
      if (previous == -2) return;
      if (previous != -1 && previous != w.write_fd) {
        set_wakeup_fd(previous);
        return;
      }
      w.installed = true;
    }
    tdist::Group g;
    uint64_t seq = 0;
    try {
      g = group ? group : tdist::group_world();
      seq = number_of(*g);
    } catch (const tdist::DistError&) {
      // Not initialized, or a device the group does not serve: the call itself says so.
    }
    if (!g) return;
    {
      std::lock_guard<std::mutex> lock(w.mu);
      w.group = std::move(g);
      w.op = op;
      w.seq = seq;
      w.fired = false;
    }
    inline_ = watched_ = true;
  }

  void disarm() {
    if (!watched_) return;
    watched_ = false;
    tdist::Group done;  // released outside the lock
    InlineWatch& w = inline_watch();
    std::lock_guard<std::mutex> lock(w.mu);
    fired_ = w.fired;
    done = std::move(w.group);
    w.fired = false;
  }

  bool inline_ = false;
  bool watched_ = false;
  bool fired_ = false;
};

}  // namespace tdist_py
