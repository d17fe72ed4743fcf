// What one nccl backend's operations, Works and watchdog share: the
// communicator, its device and stream, the group's failure, and the Works
// still in flight. Works hold it (shared), so it outlives the backend while a
// Work does.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backends/nccl/nccl_library.h"

namespace tdist::nccl {

class NcclWork;

// Sets the calling thread's CUDA device for a scope. Unlike
// device::cuda::DeviceGuard it never throws: it runs in destructors and in
// the watchdog's teardown, where CUDA may already be failing.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
  int device_;
};

// DistBackendError "<where>: <call> failed: <CUDA's message>" unless ok.
void check_cuda(cudaError_t rc, const std::string& where, const char* call);

struct CommState {
  CommState(const Api& api, std::string label, bool blocking_wait);
  ~CommState();

  const Api& api;
  const std::string label;  // "rank 3 in group default_pg"
  const std::shared_ptr<const std::string> shared_label;
  const bool blocking_wait;  // TDIST_NCCL_BLOCKING_WAIT / TORCH_NCCL_BLOCKING_WAIT

  // Set once, by the thread that makes the communicator (under the backend's
  // issue lock), before any Work exists; read without a lock afterwards.
  int device = -1;
  cudaStream_t stream = nullptr;  // the backend's NCCL stream on `device`
  cudaEvent_t ready = nullptr;    // recorded on the caller's stream; `stream` waits on it
  void* scratch = nullptr;        // barrier's one float on the device

  // The communicator: null before it is made and after it is aborted or destroyed.
  ncclComm_t comm() const;
  void set_comm(ncclComm_t comm);

  // The group's first failure, or null; `failed` answers without the lock.
  std::exception_ptr failure() const;
  std::atomic<bool> failed{false};
  // The error for an operation that cannot start because the group failed
  // ("<label>: all_reduce #4 not started: the group failed earlier: <cause>"), or null.
  std::exception_ptr failed_before(const std::string& op, uint64_t seq) const;

  // Hands a Work to the watchdog.
  void track(std::shared_ptr<NcclWork> work);
  // `work` passed its deadline: fails it with the timeout, every other Work in
  // flight with that cause, later operations at once, and aborts the
  // communicator (ncclCommAbort). Idempotent.
  void time_out(NcclWork& work);
  // Fails the group with `cause`: every Work in flight, later operations, and
  // aborts the communicator. Idempotent (the first cause stays).
  void fail(std::exception_ptr cause);

  // The watchdog thread ("tdist-nccl-wd"): completes Works whose end event
  // has run, fails one past its deadline, and checks NCCL's asynchronous
  // errors. It sleeps between polls, and while nothing is in flight.
  void start_watchdog();
  void stop_watchdog();
  // Releases the communicator at shutdown: destroyed when nothing is in
  // flight, aborted (its Works failed with `cause`) otherwise.
  void release(std::exception_ptr cause);

 private:
  void watch();
  void poll_once();
  void abort_comm_locked();

  mutable std::mutex mu_;
  std::condition_variable wake_;
  ncclComm_t comm_ = nullptr;
  std::exception_ptr failure_;
  std::vector<std::shared_ptr<NcclWork>> pending_;
  bool stop_ = false;
  std::thread watchdog_;
};

}  // namespace tdist::nccl
