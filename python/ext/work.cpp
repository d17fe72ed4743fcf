// What Work does (waits, parking the arrays of a dropped one, its futures;
// its Python type is in work_object.cpp) and Future (wait, value, done,
// then, add_done_callback). Every blocking wait releases the GIL. Callbacks
// run on the thread that completes the operation; they take the GIL to call
// into Python.
#include "work.h"

#include <pybind11/chrono.h>
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include <tdist/errors.h>
#include <tdist/future.h>

#include "args.h"
#include "errors.h"
#include "inline_call.h"
#include "interruptible_wait.h"

namespace tdist_py {
namespace {

// Arrays of pending operations whose Work was dropped. Never destroyed (a
// static destructor would run after the interpreter is gone).
auto& parked() {
  static auto* list = new std::vector<std::pair<std::shared_ptr<tdist::Work>, py::object>>();
  return *list;
}

// A Python object captured by a C++ callback, which may be destroyed on a
// progress thread: its reference is released with the GIL held.
class GilObject {
 public:
  explicit GilObject(py::object o) : obj_(new py::object(std::move(o))) {}
  ~GilObject() {
    if (!Py_IsInitialized()) return;  // interpreter gone: leak rather than crash
    py::gil_scoped_acquire gil;
    delete obj_;
  }
  GilObject(const GilObject&) = delete;
  GilObject& operator=(const GilObject&) = delete;
  const py::object& get() const { return *obj_; }

 private:
  py::object* obj_;
};

// The result a then-callback returned (torch: the chained future's value).
struct Slot {
  std::optional<std::shared_ptr<GilObject>> value;
};

// The value of a get_future_result() future: a WorkResult code, set (without
// the GIL) before the future completes.
struct ResultCode {
  std::atomic<int> code{static_cast<int>(tdist::WorkResult::UNKNOWN)};
};

// Waits for `future` (GIL held on entry, released while waiting), in slices
// so that Ctrl-C ends the wait (interruptible_wait.h): a signal handler's
// exception is raised. The operation goes on (a future does not know its
// group): the arrays stay with the future's holders.
void wait_future(tdist::Future& future) {
  if (!future.completed()) {
    struct Latch {
      std::mutex mu;
      std::condition_variable cv;
      bool open = false;
    };
    auto latch = std::make_shared<Latch>();
    {
      py::gil_scoped_release nogil;
      future.add_done_callback([latch](tdist::Future&) {
        std::lock_guard<std::mutex> lock(latch->mu);
        latch->open = true;
        latch->cv.notify_all();
      });
    }
    const bool checks = main_thread_ident() != 0 && PyThread_get_thread_ident() == main_thread_ident();
    for (;;) {
      {
        py::gil_scoped_release nogil;
        std::unique_lock<std::mutex> lock(latch->mu);
        if (checks)
          latch->cv.wait_for(lock, kSignalCheckEvery, [&] { return latch->open; });
        else
          latch->cv.wait(lock, [&] { return latch->open; });
        if (latch->open) break;
      }
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    }
  }
  py::gil_scoped_release nogil;
  future.wait();  // complete: rethrows its error
}

class PyFuture {
 public:
  PyFuture(std::shared_ptr<tdist::Future> future, std::shared_ptr<GilObject> outputs, std::shared_ptr<Slot> slot,
           std::shared_ptr<ResultCode> result_code = nullptr)
      : future_(std::move(future)),
        outputs_(std::move(outputs)),
        slot_(std::move(slot)),
        result_code_(std::move(result_code)) {}

  bool done() const { return future_->completed(); }

  py::object wait() {
    wait_future(*future_);
    return value_now();
  }

  py::object value() {
    wait_future(*future_);  // rethrows the error
    return value_now();
  }

  std::shared_ptr<PyFuture> then(py::function callback) {
    auto cb = std::make_shared<GilObject>(std::move(callback));
    auto self = std::make_shared<PyFuture>(future_, outputs_, slot_, result_code_);
    auto slot = std::make_shared<Slot>();
    std::shared_ptr<tdist::Future> chained;
    {
      // The callback may run at once on this thread, or concurrently on the
      // completing one: neither may wait for the GIL we hold.
      py::gil_scoped_release nogil;
      chained = future_->then([cb, self, slot](tdist::Future&) {
        py::gil_scoped_acquire gil;
        try {
          py::object result = cb->get()(self);
          slot->value = std::make_shared<GilObject>(std::move(result));
        } catch (py::error_already_set& e) {
          // Becomes the chained future's error.
          throw tdist::DistError(std::string("Future.then callback raised: ") + e.what());
        }
      });
    }
    return std::make_shared<PyFuture>(std::move(chained), outputs_, slot, result_code_);
  }

  void add_done_callback(py::function callback) {
    auto cb = std::make_shared<GilObject>(std::move(callback));
    auto self = std::make_shared<PyFuture>(future_, outputs_, slot_, result_code_);
    py::gil_scoped_release nogil;
    future_->add_done_callback([cb, self](tdist::Future&) {
      py::gil_scoped_acquire gil;
      try {
        cb->get()(self);
      } catch (py::error_already_set& e) {
        // No future to carry it: report like an unraisable exception.
        e.discard_as_unraisable("tdist Future.add_done_callback");
      }
    });
  }

  py::object exception() const {
    if (!future_->completed()) return py::none();
    return exception_object(future_->exception());
  }

 private:
  py::object value_now() const {
    if (slot_ && slot_->value) return (*slot_->value)->get();
    if (result_code_) return py::module_::import("tdist").attr("WorkResult")(result_code_->code.load());
    return outputs_->get();
  }
  std::shared_ptr<tdist::Future> future_;
  std::shared_ptr<GilObject> outputs_;
  std::shared_ptr<Slot> slot_;
  std::shared_ptr<ResultCode> result_code_;  // set: a get_future_result() future
};

}  // namespace

PyWork::~PyWork() {
  // Runs with the GIL (Python drops the handle). An operation still going on
  // keeps its arrays parked until it completes.
  if (work_ && !work_->is_completed() && !keep_.owns_nothing()) {
    parked().emplace_back(work_, keep_.owners());
  }
}

void prune_parked() {
  auto& list = parked();
  std::erase_if(list, [](const auto& entry) { return entry.first->completed_now(); });
}

void clear_parked() { parked().clear(); }

void wait_for(const std::shared_ptr<tdist::Work>& work, const tdist::Group& group, const Keep* keep,
              std::chrono::milliseconds timeout) {
  if (!work) return;
  if (timeout == tdist::kNoTimeout) {
    // Unbounded: the operation may run on this thread if it has not started
    // (PendingWork::wait), or drive the transport here (point-to-point), with
    // Ctrl-C watched as for a blocking call. Not asked is_completed() first:
    // that would start a deferred operation on the group's thread, which this
    // thread is about to run itself (work_queue.h: Deferred starts). An
    // operation already over (an eager send) needs neither the watch nor the
    // GIL released: its wait only returns or raises its error.
    if (work->completed_now()) {
      work->wait();
      return;
    }
    InlineCall watched(group, *work);
    if (watched.runs_inline()) {
      watched.run([&] { return work->wait(); });
      return;
    }
  }
  bool done;
  try {
    py::gil_scoped_release nogil;
    done = wait_interruptibly(*work, timeout, [&](const std::string& raised) {
      tdist::Group g = group ? group : tdist::group_world();
      fail_interrupted(*g, *work, raised);
    });
  } catch (py::error_already_set&) {
    // Interrupted: the failed group ends the operation soon, but until then
    // it may still use the arrays.
    if (keep && !work->is_completed() && !keep->owns_nothing()) parked().emplace_back(work, keep->owners());
    throw;
  }
  if (!done) {
    const tdist::Group g = group ? group : tdist::group_world();
    throw_wait_timed_out(describe_operation(*g, *work), timeout);
  }
}

py::object finish(std::shared_ptr<tdist::Work> work, bool async_op, Keep keep, const tdist::Group& group) {
  prune_parked();
  if (async_op) return make_work_object(std::move(work), std::move(keep), group);
  wait_for(work, group, &keep);
  return py::none();
}

py::object work_get_future(const PyWork& self) {
  std::shared_ptr<tdist::Future> future = self.work()->get_future();
  auto outputs = std::make_shared<GilObject>(self.keep().outputs());
  // The future's users may outlive this Work: they keep the arrays too.
  auto keep = std::make_shared<GilObject>(self.keep().owners());
  auto holder = std::shared_ptr<tdist::Future>(future.get(), [future, keep](tdist::Future*) {});
  return py::cast(std::make_shared<PyFuture>(holder, outputs, nullptr));
}

py::object work_get_future_result(const PyWork& self) {
  std::shared_ptr<tdist::WorkResultFuture> result = self.work()->get_future_result();
  auto code = std::make_shared<ResultCode>();
  auto future = std::make_shared<tdist::Future>();
  result->add_done_callback([code, future](tdist::WorkResult r) {
    code->code.store(static_cast<int>(r));
    future->mark_completed();
  });
  // The arrays stay alive as long as the future's users hold it.
  auto keep = std::make_shared<GilObject>(self.keep().owners());
  auto holder = std::shared_ptr<tdist::Future>(future.get(), [future, keep](tdist::Future*) {});
  return py::cast(std::make_shared<PyFuture>(holder, nullptr, nullptr, code));
}

void bind_work(py::module_& m) {
  py::class_<PyFuture, std::shared_ptr<PyFuture>>(m, "Future",
      "The future of an operation (Work.get_future()): its value is the list of the operation's "
      "output arrays, or, for a future made by then(), what the callback returned.")
      .def("done", &PyFuture::done, "Whether the operation has completed (successfully or not).")
      .def("wait", &PyFuture::wait, "Blocks until complete (GIL released); raises its error; returns value().")
      .def("value", &PyFuture::value, "The value; blocks until complete and raises the error if any.")
      .def("then", &PyFuture::then, py::arg("callback"),
           "Runs callback(future) once this completes (on the completing thread) and returns a Future whose "
           "value is what callback returned; an exception in callback becomes its error.")
      .def("add_done_callback", &PyFuture::add_done_callback, py::arg("callback"),
           "Runs callback(future) once complete; its exceptions are reported, not raised.")
      .def("exception", &PyFuture::exception, "The error of a completed future, or None.");

  bind_work_type(m);
}

}  // namespace tdist_py
