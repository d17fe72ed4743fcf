#include "work.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <optional>

#include <ATen/ThreadLocalState.h>
#include <ATen/core/jit_type.h>

#include "cuda_streams.h"
#include "tdist/errors.h"
#include "../../ext/inline_call.h"
#include "../../ext/interruptible_wait.h"

namespace tdist_torch {

namespace {

// Waits for `work` of `group` without a bound, on this thread: the operation
// runs here if its group's thread has not started it, and point-to-point
// drives the transport here (PendingWork::wait, the transport's wait), with
// Ctrl-C watched as for a blocking call (inline_call.h). False where that
// watch cannot be set: the caller then waits in slices.
bool wait_watched(const tdist::Group& group, tdist::Work& work) {
  std::optional<tdist_py::InlineCall> call;
  {
    pybind11::gil_scoped_acquire gil;
    call.emplace(group, work);
    if (!call->runs_inline()) return false;
  }
  std::exception_ptr error;
  try {
    work.wait();
  } catch (...) {
    error = std::current_exception();
  }
  {
    pybind11::gil_scoped_acquire gil;
    const bool fired = call->finish();
    call.reset();
    if (fired && PyErr_CheckSignals() != 0) throw pybind11::error_already_set();
  }
  if (error) std::rethrow_exception(error);
  return true;
}

}  // namespace

std::shared_ptr<ProfilerSpan> ProfilerSpan::open(const char* op, c10::ArrayRef<at::Tensor> inputs) {
  // USER_SCOPE, as c10d::Work's spans: what torch.profiler and
  // record_function observe. The common case, nobody observing, ends here.
  auto callbacks = at::getStepCallbacksUnlessEmpty(at::RecordScope::USER_SCOPE);
  if (!callbacks) return nullptr;
  auto span = std::make_shared<ProfilerSpan>();
  span->record_ = std::make_unique<at::RecordFunction>(std::move(*callbacks));
  at::RecordFunction& record = *span->record_;
  record._setAsync();  // it may end on another thread than the one that began it
  std::string title = std::string("tdist:") + op;
  if (record.needsInputs()) {
    span->inputs_.assign(inputs.begin(), inputs.end());
    record.before(std::move(title), c10::ArrayRef<const c10::IValue>(span->inputs_.data(), span->inputs_.size()));
  } else {
    record.before(std::move(title));
  }
  // The profiler finds its state in thread-locals of the thread that began
  // the span; whichever thread ends it runs with a copy of them (as
  // c10d::Work's end callback does).
  span->end_ = at::wrapPropagateTLSState([&record] { record.end(); });
  return span;
}

void ProfilerSpan::close() {
  std::function<void()> end;
  {
    std::lock_guard<std::mutex> lock(mu_);
    end.swap(end_);
  }
  if (end) end();
}

WorkTdist::WorkTdist(int rank, c10d::OpType type, std::string op, std::vector<std::shared_ptr<tdist::Work>> works,
                     std::vector<at::Tensor> outputs, std::vector<at::Tensor> inputs,
                     std::shared_ptr<ProfilerSpan> span, std::weak_ptr<tdist::ProcessGroup> group)
    : c10d::Work(rank, type),
      op_(std::move(op)),
      works_(std::move(works)),
      outputs_(std::move(outputs)),
      inputs_(std::move(inputs)),
      span_(std::move(span)),
      cuda_device_(std::max(cuda_device_of(outputs_), cuda_device_of(inputs_))),
      group_(std::move(group)) {
  if (!span_) return;
  // A collective's span ends on the thread that completes its last part
  // (tdist's progress thread for an async one), as a Gloo work's does on its
  // worker. Point-to-point works have no future (as with Gloo): their span
  // ends when the program sees them complete (wait, is_completed), or when
  // the group lets go of them, which it does only once they have completed.
  if (works_.empty() || all_completed()) {
    span_->close();
    return;
  }
  if (is_point_to_point()) return;
  auto left = std::make_shared<std::atomic<size_t>>(works_.size());
  for (auto& w : works_) {
    std::shared_ptr<tdist::Future> future;
    try {
      future = w->get_future();
    } catch (const tdist::DistError&) {
      return;  // a part without a future: closed as a point-to-point span
    }
    future->add_done_callback([span = span_, left](tdist::Future&) {
      if (left->fetch_sub(1) == 1) span->close();
    });
  }
}

bool WorkTdist::all_completed() const {
  for (auto& w : works_)
    if (!w->completed_now()) return false;
  return true;
}

void WorkTdist::close_span_if_completed() {
  if (span_ && all_completed()) span_->close();
}

bool WorkTdist::isCompleted() {
  for (auto& w : works_)
    if (!w->is_completed()) return false;
  if (span_) span_->close();
  return true;
}

bool WorkTdist::isSuccess() const {
  for (auto& w : works_)
    if (!w->is_success()) return false;
  return true;
}

std::exception_ptr WorkTdist::exception() const {
  for (auto& w : works_)
    if (auto e = w->exception()) return e;
  return nullptr;
}

int WorkTdist::sourceRank() const {
  if (works_.size() != 1)
    throw tdist::DistValueError("tdist (torch backend), rank " + std::to_string(rank_) + ": " + op_ +
                                " has no source rank");
  return works_.front()->source_rank();
}

std::vector<at::Tensor> WorkTdist::result() { return outputs_; }

void WorkTdist::synchronize() {
  if (cuda_device_ < 0) return;
  const TorchStreamScope streams(cuda_device_);
  for (auto& w : works_) w->synchronize();
}

bool WorkTdist::wait(std::chrono::milliseconds timeout) {
  using clock = std::chrono::steady_clock;
  // The span ends before wait returns, even where the completing thread has
  // yet to run its callbacks: a program that stops its profiler right after
  // waiting must find the span closed. A wait that timed out leaves it open.
  if (interrupted_) {
    pybind11::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() != 0) throw pybind11::error_already_set();
  }
  try {
    const TorchStreamScope streams(cuda_device_);  // the stream tdist's wait orders, for CUDA tensors
    const bool bounded = timeout > std::chrono::milliseconds(0);
    const auto deadline = clock::now() + (bounded ? timeout : std::chrono::milliseconds(0));
    for (auto& w : works_) {
      if (!bounded && !w->completed_now()) {
        if (auto group = group_.lock(); group && wait_watched(group, *w)) continue;
      }
      auto left = bounded ? std::max(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now()),
                                     std::chrono::milliseconds(1))
                          : tdist::kNoTimeout;
      const bool done = tdist_py::wait_interruptibly(*w, left, [&](const std::string& raised) {
        if (auto group = group_.lock()) tdist_py::fail_interrupted(*group, *w, raised);
      });
      if (!done) {
        auto group = group_.lock();
        tdist_py::throw_wait_timed_out(group ? tdist_py::describe_operation(*group, *w)
                                             : "rank " + std::to_string(rank_) + ": " + w->op_name() + " #" +
                                                   std::to_string(w->sequence_number()),
                                       timeout);
      }
    }
  } catch (...) {
    close_span_if_completed();
    throw;
  }
  close_span_if_completed();
  return true;
}

void WorkTdist::abort() {
  throw tdist::DistBackendError("tdist (torch backend), rank " + std::to_string(rank_) + ": " + op_ +
                                ": Work.abort is not supported (destroy the process group to fail pending operations)");
}

bool WorkTdist::is_point_to_point() const {
  return opType_ == c10d::OpType::SEND || opType_ == c10d::OpType::RECV || opType_ == c10d::OpType::RECVANYSOURCE;
}

c10::intrusive_ptr<c10::ivalue::Future> WorkTdist::getFuture() {
  std::lock_guard<std::mutex> lock(future_mu_);
  if (future_) return future_;
  if (is_point_to_point())
    throw tdist::DistBackendError("tdist (torch backend), rank " + std::to_string(rank_) + ": " + op_ +
                                  " has no future (point-to-point operations do not, as with Gloo); use wait()");
  // For CUDA tensors a CUDA-aware future (as ProcessGroupNCCL's): its value's
  // users, and those who wait on it, are ordered after the operation on the device.
  std::vector<c10::Device> devices;
  if (cuda_device_ >= 0) devices.emplace_back(c10::kCUDA, static_cast<c10::DeviceIndex>(cuda_device_));
  auto future =
      c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()), std::move(devices));
  // Completes once every part has: with the outputs, or the first error.
  // Runs on the thread that finishes the last part (tdist's progress thread
  // for async operations), as Gloo runs it on its worker thread.
  struct Pending {
    std::atomic<size_t> left;
    std::mutex mu;
    std::exception_ptr error;
  };
  auto pending = std::make_shared<Pending>();
  pending->left = works_.size();
  auto outputs = outputs_;
  // Weak: the callback lives in the parts' futures, which the parts own.
  std::vector<std::weak_ptr<tdist::Work>> parts(works_.begin(), works_.end());
  auto finish = [future, pending, outputs, parts, device = cuda_device_](tdist::Future& part) {
    if (auto e = part.exception()) {
      std::lock_guard<std::mutex> lock(pending->mu);
      if (!pending->error) pending->error = e;
    }
    if (pending->left.fetch_sub(1) != 1) return;
    if (pending->error) {
      future->setError(pending->error);
      return;
    }
    try {
      std::vector<std::shared_ptr<tdist::Work>> works;
      for (auto& p : parts)
        if (auto w = p.lock()) works.push_back(std::move(w));
      complete_after(works, device, [&] { future->markCompleted(c10::IValue(outputs)); });
    } catch (...) {
      future->setErrorIfNeeded(std::current_exception());
    }
  };
  future_ = future;
  if (works_.empty()) {
    complete_after(works_, cuda_device_, [&] { future->markCompleted(c10::IValue(outputs_)); });
    return future_;
  }
  for (auto& w : works_) w->get_future()->add_done_callback(finish);
  return future_;
}

c10::intrusive_ptr<c10::ivalue::Future> WorkTdist::getFutureResult() {
  std::lock_guard<std::mutex> lock(future_mu_);
  if (result_future_) return result_future_;
  if (is_point_to_point())
    throw tdist::DistBackendError("tdist (torch backend), rank " + std::to_string(rank_) + ": " + op_ +
                                  " has no future (point-to-point operations do not, as with Gloo); use wait()");
  auto future = c10::make_intrusive<c10::ivalue::Future>(c10::IntType::get());
  result_future_ = future;
  // The first part that did not succeed says how the whole did.
  struct Pending {
    std::atomic<size_t> left;
    std::mutex mu;
    tdist::WorkResult result = tdist::WorkResult::SUCCESS;
  };
  auto pending = std::make_shared<Pending>();
  pending->left = works_.size();
  auto to_torch = [](tdist::WorkResult r) {
    switch (r) {
      case tdist::WorkResult::SUCCESS: return c10d::WorkResult::SUCCESS;
      case tdist::WorkResult::TIMEOUT: return c10d::WorkResult::TIMEOUT;
      case tdist::WorkResult::COMM_ERROR: return c10d::WorkResult::COMM_ERROR;
      default: return c10d::WorkResult::UNKNOWN;
    }
  };
  auto finish = [future, pending, to_torch](tdist::Future& part) {
    auto r = tdist::Work::result_of(part.exception());
    {
      std::lock_guard<std::mutex> lock(pending->mu);
      if (pending->result == tdist::WorkResult::SUCCESS) pending->result = r;
    }
    if (pending->left.fetch_sub(1) != 1) return;
    future->markCompleted(c10::IValue(static_cast<int64_t>(to_torch(pending->result))));
  };
  if (works_.empty()) {
    future->markCompleted(c10::IValue(static_cast<int64_t>(c10d::WorkResult::SUCCESS)));
    return future;
  }
  for (auto& w : works_) w->get_future()->add_done_callback(finish);
  return future;
}

}  // namespace tdist_torch
