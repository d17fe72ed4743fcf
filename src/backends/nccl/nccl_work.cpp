#include "backends/nccl/nccl_work.h"

#include <thread>

#include "backends/nccl/nccl_state.h"
#include "device/current_stream.h"
#include "device/device_runtime.h"
#include "tdist/errors.h"
#include "util/error_context.h"

namespace tdist::nccl {

namespace {

// The calling thread's current stream on `device` (the runtime's view: the
// plugin makes it torch's), or the legacy default stream.
cudaStream_t caller_stream(int device) {
  device::Runtime* rt = device::runtime(DeviceType::CUDA);
  void* s = rt != nullptr ? rt->current_stream(device) : device::thread_current_stream(device);
  return s != nullptr ? static_cast<cudaStream_t>(s) : cudaStreamLegacy;
}

}  // namespace

NcclWork::NcclWork(std::shared_ptr<CommState> state, Spec spec)
    : state_(std::move(state)),
      spec_(std::move(spec)),
      op_(spec_.op),
      deadline_(Deadline::after(spec_.timeout)),
      kept_(std::move(spec_.keep)) {
  if (state_ && state_->device >= 0) {
    device_ = state_->device;
    DeviceGuard guard(device_);
    check_cuda(cudaEventCreateWithFlags(&end_, cudaEventDisableTiming),
               state_->label + ": " + op_ + " #" + std::to_string(spec_.seq), "cudaEventCreateWithFlags");
  }
}

NcclWork::~NcclWork() {
  // At process exit the CUDA runtime may be gone already: nothing to report then.
  if (end_ != nullptr) cudaEventDestroy(end_);
}

std::shared_ptr<NcclWork> NcclWork::failed(std::shared_ptr<CommState> state, const char* op, uint64_t seq,
                                           std::exception_ptr error, trace::FlightMark mark) {
  // No event: the Work is done before it could be enqueued.
  auto work = std::make_shared<NcclWork>(nullptr, Spec{op, seq, {}, {}, std::chrono::milliseconds(0)});
  work->state_ = std::move(state);
  work->set_mark(mark);
  work->finish(std::move(error));
  return work;
}

void NcclWork::set_mark(trace::FlightMark mark) {
  mark_ = mark;
  if (mark_) recorder_ = mark_.hold();
}

bool NcclWork::poll() const {
  if (done_.load(std::memory_order_acquire)) return true;
  // An event never recorded counts as complete for CUDA: not yet ours.
  if (end_ == nullptr || !issued_.load(std::memory_order_acquire)) return false;
  const cudaError_t rc = cudaEventQuery(end_);
  if (rc == cudaErrorNotReady) return false;
  if (rc == cudaSuccess) {
    finish(nullptr);
  } else {
    cudaGetLastError();  // not sticky for a query; keep the thread's error state clean
    finish(std::make_exception_ptr(DistBackendError(
        (state_ ? state_->label + ": " : std::string()) + op_ + " #" + std::to_string(spec_.seq) + " on cuda:" +
        std::to_string(device_) + " failed: cudaEventQuery: " + cudaGetErrorString(rc))));
  }
  return true;
}

void NcclWork::finish(std::exception_ptr error) const {
  std::shared_ptr<Future> future;
  std::vector<Tensor> released;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_.load(std::memory_order_relaxed)) return;
    error_ = std::move(error);
    done_.store(true, std::memory_order_release);
    future = future_;
    released.swap(kept_);
  }
  mark_.ended(error_);
  if (future) {
    if (error_)
      future->set_error(error_);
    else
      future->mark_completed(spec_.result);
  }
}

bool NcclWork::is_completed() const { return poll(); }

bool NcclWork::is_success() const { return poll() && !error_; }

std::exception_ptr NcclWork::exception() const { return poll() ? error_ : nullptr; }

void NcclWork::synchronize() {
  if (end_ == nullptr || device_ < 0) return;
  DeviceGuard guard(device_);
  check_cuda(cudaStreamWaitEvent(caller_stream(device_), end_, 0),
             state_->label + ": " + op_ + " #" + std::to_string(spec_.seq), "cudaStreamWaitEvent");
}

bool NcclWork::wait(std::chrono::milliseconds timeout) {
  if (done_.load(std::memory_order_acquire) && error_) std::rethrow_exception(error_);
  if (!issued_.load(std::memory_order_acquire))
    throw DistBackendError((state_ ? state_->label + ": " : std::string()) + op_ + " #" + std::to_string(spec_.seq) +
                           ": Work::wait inside a batch: its operations run when the batch ends "
                           "(end_coalescing), so waiting before would never return");
  synchronize();
  const bool given = timeout != kNoTimeout;
  if (given || spec_.barrier || (state_ && state_->blocking_wait)) {
    // Blocks the host: polls the event, sleeping a little longer each time
    // (a small operation is done within microseconds, a large one takes ms).
    const Deadline until = given ? Deadline::after(timeout) : deadline_;
    auto nap = std::chrono::microseconds(20);
    while (!poll()) {
      if (until.expired()) {
        if (given)
          throw DistBackendError((state_ ? state_->label + ": " : std::string()) + op_ + " #" +
                                 std::to_string(spec_.seq) + ": Work::wait: Timed out after " +
                                 std::to_string(timeout.count()) + " ms (the operation is still in progress)");
        state_->time_out(*this);  // its own deadline: as the watchdog would
        break;
      }
      std::this_thread::sleep_for(nap);
      nap = std::min(nap * 2, std::chrono::microseconds(1000));
    }
  }
  if (done_.load(std::memory_order_acquire) && error_) std::rethrow_exception(error_);
  return true;
}

std::shared_ptr<Future> NcclWork::get_future() {
  if (spec_.peer >= 0)
    throw DistBackendError((state_ ? state_->label + ": " : std::string()) + op_ + " #" + std::to_string(spec_.seq) +
                           ": point-to-point operations have no future (as torch's Gloo)");
  std::shared_ptr<Future> future;
  bool finished;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (future_) return future_;
    future_ = future = std::make_shared<Future>();
    finished = done_.load(std::memory_order_relaxed);
  }
  if (finished) {
    if (error_)
      future->set_error(error_);
    else
      future->mark_completed(spec_.result);
  }
  return future;
}

}  // namespace tdist::nccl
