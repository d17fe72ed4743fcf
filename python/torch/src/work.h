// The c10d::Work that torch hands to Python for an operation of the tdist
// backend. It wraps one or more tdist::Works (several for the coalesced
// operations, which run as one tdist operation per tensor) and holds the
// at::Tensors whose memory the operation reads and writes.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <ATen/core/ivalue.h>
#include <ATen/record_function.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "tdist/process_group.h"
#include "tdist/work.h"

namespace tdist_torch {

// The torch.profiler span of one operation: named as torch's ProcessGroups
// name theirs ("tdist:all_reduce" beside Gloo's "gloo:all_reduce") and given
// the input tensors, so that record_shapes shows their sizes and dtypes.
// c10d::Work opens such a span in its constructor (its profilingTitle); ours
// is opened before the operation is issued instead, because the Work is made
// after, when a small operation may be over already. It is an async event
// (it may end on another thread), closed once the operation completes.
class ProfilerSpan {
 public:
  // Null unless a profiler (a RecordFunction callback) is active: then an
  // operation pays for one check of the callback lists and nothing else.
  static std::shared_ptr<ProfilerSpan> open(const char* op, c10::ArrayRef<at::Tensor> inputs);
  ProfilerSpan() = default;
  ProfilerSpan(const ProfilerSpan&) = delete;
  ProfilerSpan& operator=(const ProfilerSpan&) = delete;
  ~ProfilerSpan() { close(); }
  // Ends the span; the first call counts, from any thread.
  void close();

 private:
  std::vector<c10::IValue> inputs_;  // what record_shapes reads: alive as long as the span
  std::unique_ptr<at::RecordFunction> record_;
  std::mutex mu_;
  std::function<void()> end_;  // empty once closed
};

class WorkTdist final : public c10d::Work {
 public:
  // `outputs`: what result() and the future hold; `inputs`: other tensors the
  // operation reads, kept alive until it completes; `span`: its profiler
  // span or null, closed when every part has completed; `group`: the tdist
  // group it runs in, failed when Ctrl-C interrupts a wait for it.
  WorkTdist(int rank, c10d::OpType type, std::string op, std::vector<std::shared_ptr<tdist::Work>> works,
            std::vector<at::Tensor> outputs, std::vector<at::Tensor> inputs = {},
            std::shared_ptr<ProfilerSpan> span = nullptr, std::weak_ptr<tdist::ProcessGroup> group = {});

  // torch's poll: also starts an operation whose start tdist deferred (tdist::Work::is_completed).
  bool isCompleted() override;
  // The same answer, starting nothing: for the group's list of works in flight.
  bool settled() {
    const bool done = all_completed();
    if (done && span_) span_->close();
    return done;
  }
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  int sourceRank() const override;
  std::vector<at::Tensor> result() override;
  // CUDA tensors: torch's current stream of their device waits (on the
  // device) for the operation, tdist's Work::synchronize; CPU: nothing to do.
  void synchronize() override;
  // timeout 0 (torch's kNoTimeout): wait as long as the operation takes (it
  // has its own deadline, the group's timeout). Rethrows tdist's error. On
  // Python's main thread, Ctrl-C ends the wait: the group is failed and
  // KeyboardInterrupt raised (python/ext/interruptible_wait.h). For CUDA
  // tensors tdist's wait orders torch's current stream after the operation
  // (ProcessGroupNCCL's semantics: the host does not wait for the device).
  bool wait(std::chrono::milliseconds timeout) override;
  // A Ctrl-C failed the group while the operation ran on the calling thread
  // (a blocking call, python/ext/inline_call.h): wait() raises its
  // KeyboardInterrupt before the operation's error.
  void mark_interrupted() { interrupted_ = true; }
  void abort() override;
  // A future completed with the output tensors (DDP's comm hooks chain on
  // it). Point-to-point operations have none, as with Gloo.
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  // A future completed with torch's WorkResult (SUCCESS, or COMM_ERROR for
  // any failure) once every part has ended; it never holds an error, so a
  // program can look at the outcome without catching. Point-to-point too.
  c10::intrusive_ptr<c10::ivalue::Future> getFutureResult() override;

 private:
  bool is_point_to_point() const;
  bool all_completed() const;  // starts nothing (tdist::Work::completed_now)
  void close_span_if_completed();
  const std::string op_;
  const std::vector<std::shared_ptr<tdist::Work>> works_;
  const std::vector<at::Tensor> outputs_;
  const std::vector<at::Tensor> inputs_;
  const std::shared_ptr<ProfilerSpan> span_;
  // The CUDA device of the operation's tensors, -1 for CPU tensors: whose
  // current stream wait() and synchronize() order, and the device of the futures.
  const int cuda_device_;
  const std::weak_ptr<tdist::ProcessGroup> group_;  // weak: a Work kept by Python must not keep a destroyed group
  bool interrupted_ = false;
  std::mutex future_mu_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  c10::intrusive_ptr<c10::ivalue::Future> result_future_;
};

}  // namespace tdist_torch
