// The Work of an nccl operation: done when the end event recorded on the
// backend's NCCL stream after it has run (cudaEventQuery), failed by the
// watchdog at its deadline or when the group fails. wait() orders the
// caller's current stream after it (synchronize()) and, with blocking wait
// (TDIST_NCCL_BLOCKING_WAIT, a timeout given to wait(), or a barrier), also
// blocks the calling thread until it is done. Holds the operation's tensors
// (and staging memory) until it is done, so a DLPack owner cannot free them
// under the device.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tdist/work.h"
#include "trace/flight_recorder.h"
#include "util/deadline.h"

namespace tdist::nccl {

struct CommState;

class NcclWork final : public Work {
 public:
  struct Spec {
    const char* op;
    uint64_t seq;
    std::vector<Tensor> result;  // what get_future()/result() give
    std::vector<Tensor> keep;    // inputs to hold until done
    std::chrono::milliseconds timeout;
    int peer = -1;               // point-to-point: group rank of the peer
    bool barrier = false;        // wait() blocks the host, as torch's barrier
  };
  NcclWork(std::shared_ptr<CommState> state, Spec spec);
  ~NcclWork() override;
  // A Work that failed before anything was enqueued.
  static std::shared_ptr<NcclWork> failed(std::shared_ptr<CommState> state, const char* op, uint64_t seq,
                                          std::exception_ptr error, trace::FlightMark mark = {});

  bool is_completed() const override;
  bool is_success() const override;
  std::exception_ptr exception() const override;
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  void synchronize() override;
  int source_rank() const override { return spec_.peer; }
  std::shared_ptr<Future> get_future() override;
  const std::vector<Tensor>& result() const override { return spec_.result; }
  const std::string& op_name() const override { return op_; }
  uint64_t sequence_number() const override { return spec_.seq; }

  // For the backend: the event to record on the NCCL stream after the
  // operation, memory to free once it is done, the flight recorder entry.
  cudaEvent_t end_event() const { return end_; }
  void hold(std::shared_ptr<void> extra) { extra_ = std::move(extra); }
  void set_mark(trace::FlightMark mark);
  void set_device(int device) { device_ = device; }
  int device() const { return device_; }
  const Deadline& deadline() const { return deadline_; }
  std::chrono::milliseconds timeout() const { return spec_.timeout; }

  // A Work of a batch (NcclBackend::start_coalescing): its end event is
  // recorded only when the batch ends; until then it is not done.
  void defer_issue() { issued_.store(false, std::memory_order_relaxed); }
  void issued() { issued_.store(true, std::memory_order_release); }

  // For the watchdog: queries the end event and finishes the Work when it
  // has run (true: done, either way).
  bool poll() const;
  // Ends it with `error` (null: success); the first call wins.
  void finish(std::exception_ptr error) const;

 private:
  std::shared_ptr<CommState> state_;
  Spec spec_;
  const std::string op_;
  Deadline deadline_;
  int device_ = -1;
  cudaEvent_t end_ = nullptr;
  std::shared_ptr<void> extra_;

  mutable std::mutex mu_;
  mutable std::atomic<bool> done_{false};
  std::atomic<bool> issued_{true};
  mutable std::exception_ptr error_;
  mutable std::shared_ptr<Future> future_;
  mutable trace::FlightMark mark_;
  mutable std::shared_ptr<trace::FlightRecorder> recorder_;  // keeps mark_'s recorder alive
  mutable std::vector<Tensor> kept_;                         // released when done
};

}  // namespace tdist::nccl
