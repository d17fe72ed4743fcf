#include "backends/nccl/nccl_state.h"

#include <algorithm>

#include "backends/nccl/nccl_work.h"
#include "tdist/errors.h"
#include "util/error_context.h"
#include "util/thread_name.h"

namespace tdist::nccl {

namespace {
// How often the watchdog looks at the Works in flight: often enough that a
// future completes soon after its operation, rarely enough to cost nothing.
constexpr std::chrono::milliseconds kPollEvery{2};
constexpr std::chrono::milliseconds kPollAtMost{20};
}  // namespace

DeviceGuard::DeviceGuard(int device) : device_(device) {
  if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
  if (previous_ != device_) cudaSetDevice(device_);
}

DeviceGuard::~DeviceGuard() {
  if (previous_ >= 0 && previous_ != device_) cudaSetDevice(previous_);
}

void check_cuda(cudaError_t rc, const std::string& where, const char* call) {
  if (rc == cudaSuccess) return;
  cudaGetLastError();
  throw DistBackendError((where.empty() ? "" : where + ": ") + call + " failed: " + cudaGetErrorString(rc));
}

CommState::CommState(const Api& api_, std::string label_, bool blocking_wait_)
    : api(api_),
      label(std::move(label_)),
      shared_label(std::make_shared<const std::string>(label)),
      blocking_wait(blocking_wait_) {}

CommState::~CommState() {
  stop_watchdog();
  if (device >= 0) {
    DeviceGuard guard(device);
    if (scratch) cudaFree(scratch);
    if (ready) cudaEventDestroy(ready);
    if (stream) cudaStreamDestroy(stream);
  }
}

ncclComm_t CommState::comm() const {
  std::lock_guard<std::mutex> lock(mu_);
  return comm_;
}

void CommState::set_comm(ncclComm_t comm) {
  std::lock_guard<std::mutex> lock(mu_);
  comm_ = comm;
}

std::exception_ptr CommState::failure() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failure_;
}

std::exception_ptr CommState::failed_before(const std::string& op, uint64_t seq) const {
  if (!failed.load(std::memory_order_acquire)) return nullptr;
  return with_context(failure(), label + ": " + op + " #" + std::to_string(seq) +
                                     " not started: the group failed earlier: ");
}

void CommState::track(std::shared_ptr<NcclWork> work) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_.push_back(std::move(work));
  }
  wake_.notify_one();
}

void CommState::abort_comm_locked() {
  if (comm_ == nullptr) return;
  // Frees the communicator and ends its kernels (they stop waiting for
  // peers), so the device and later groups are usable again.
  api.CommAbort(comm_);
  comm_ = nullptr;
}

void CommState::fail(std::exception_ptr cause) {
  std::vector<std::shared_ptr<NcclWork>> victims;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failure_) failure_ = cause;
    failed.store(true, std::memory_order_release);
    victims.swap(pending_);
  }
  // Works first, then the abort: a caller whose stream holds up the NCCL
  // stream learns of the failure before ncclCommAbort waits on the device.
  for (auto& w : victims)
    if (!w->poll())
      w->finish(with_context(cause, label + ": " + w->op_name() + " #" + std::to_string(w->sequence_number()) +
                                        " did not complete: "));
  std::lock_guard<std::mutex> lock(mu_);
  abort_comm_locked();
}

void CommState::time_out(NcclWork& work) {
  auto cause = std::make_exception_ptr(DistBackendError(
      label + ": " + work.op_name() + " #" + std::to_string(work.sequence_number()) + " on cuda:" +
      std::to_string(work.device()) + " timed out after " + std::to_string(work.timeout().count()) +
      " ms (nccl): communicator aborted"));
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (failure_) {  // someone failed the group first: that is the cause
      cause = failure_;
    }
  }
  work.finish(cause);
  fail(cause);
}

void CommState::start_watchdog() {
  watchdog_ = std::thread([this] { watch(); });
  name_thread(watchdog_, "tdist-nccl-wd");
}

void CommState::stop_watchdog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (!watchdog_.joinable()) return;
  if (watchdog_.get_id() == std::this_thread::get_id())
    watchdog_.detach();  // the last holder let go on the watchdog itself: it returns from here
  else
    watchdog_.join();
}

void CommState::watch() {
  bool device_set = false;
  auto interval = kPollEvery;
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (pending_.empty()) {
      interval = kPollEvery;
      wake_.wait(lock, [&] { return stop_ || !pending_.empty(); });
      continue;
    }
    if (!device_set && device >= 0) {
      cudaSetDevice(device);  // events and the communicator live there
      device_set = true;
    }
    lock.unlock();
    poll_once();
    lock.lock();
    // Back off while an operation runs long; a new one wakes us at once.
    wake_.wait_for(lock, interval);
    interval = std::min(interval * 2, kPollAtMost);
  }
}

void CommState::poll_once() {
  std::vector<std::shared_ptr<NcclWork>> works;
  {
    std::lock_guard<std::mutex> lock(mu_);
    works = pending_;
  }
  NcclWork* expired = nullptr;
  std::vector<const NcclWork*> done;
  for (auto& w : works) {
    if (w->poll())
      done.push_back(w.get());
    else if (!expired && w->deadline().expired())
      expired = w.get();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_.erase(std::remove_if(pending_.begin(), pending_.end(),
                                  [&](const std::shared_ptr<NcclWork>& w) {
                                    return std::find(done.begin(), done.end(), w.get()) != done.end();
                                  }),
                   pending_.end());
  }
  if (expired) {
    time_out(*expired);
    return;
  }
  // Errors NCCL met on its own threads (a peer gone, a network failure).
  ncclComm_t c = comm();
  if (c == nullptr) return;
  ncclResult_t async = ncclSuccess;
  if (api.CommGetAsyncError(c, &async) == ncclSuccess && async != ncclSuccess && async != ncclInProgress) {
    std::string detail = api.GetErrorString(async);
    if (api.GetLastError)
      if (const char* last = api.GetLastError(c); last && *last) detail += ": " + std::string(last);
    fail(std::make_exception_ptr(
        DistBackendError(label + ": NCCL reported an asynchronous error on cuda:" + std::to_string(device) + ": " +
                         detail + " (nccl): communicator aborted")));
  }
}

void CommState::release(std::exception_ptr cause) {
  stop_watchdog();
  std::vector<std::shared_ptr<NcclWork>> works;
  {
    std::lock_guard<std::mutex> lock(mu_);
    works = pending_;
  }
  bool in_flight = false;
  for (auto& w : works) in_flight |= !w->poll();
  if (in_flight) {
    fail(cause);  // fails them (and later operations) and aborts
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  pending_.clear();
  if (!failure_) failure_ = cause;
  failed.store(true, std::memory_order_release);
  if (comm_ != nullptr) {
    DeviceGuard guard(device);
    api.CommDestroy(comm_);
    comm_ = nullptr;
  }
}

}  // namespace tdist::nccl
