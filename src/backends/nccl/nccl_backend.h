// The "nccl" backend: tdist's operations on CUDA tensors through NCCL
// (loaded at run time, nccl_library.h), as torch's ProcessGroupNCCL runs
// them. One communicator per group on one device: made at construction when
// BackendOptions.device_id names the device (eager, as torch with device_id),
// else at the first operation, on its tensor's device. A group made from a
// parent whose communicator exists, with all of the parent's ranks, is split
// from it (ncclCommSplit); otherwise rank 0 makes a unique id and the others
// take it from the store.
//
// Each operation runs on the backend's NCCL stream, which first waits for
// the work already queued on the caller's current stream; its Work
// (nccl_work.h) completes when the NCCL stream gets past it. A watchdog
// (nccl_state.h) fails an operation past its timeout and aborts the
// communicator. docs/nccl_backend.md maps every operation to NCCL's calls.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tdist/backend.h"
#include "backends/nccl/nccl_state.h"
#include "backends/nccl/nccl_work.h"

namespace tdist::nccl {

class NcclBackend final : public Backend {
 public:
  NcclBackend(std::shared_ptr<Store> store, int rank, int size, const BackendOptions& options);
  ~NcclBackend() override;

  std::string name() const override { return "nccl"; }
  uint64_t next_sequence_number() const override;
  std::shared_ptr<Work> send(const Operation& operation) override;
  std::shared_ptr<Work> recv(const Operation& operation) override;
  std::shared_ptr<Work> broadcast(const Operation& operation) override;
  std::shared_ptr<Work> all_reduce(const Operation& operation) override;
  std::shared_ptr<Work> all_reduce_coalesced(const Operation& operation) override;
  std::shared_ptr<Work> barrier(const Operation& operation) override;
  std::shared_ptr<Work> reduce(const Operation& operation) override;
  std::shared_ptr<Work> all_gather(const Operation& operation) override;
  std::shared_ptr<Work> all_gather_into_tensor(const Operation& operation) override;
  std::shared_ptr<Work> gather(const Operation& operation) override;
  std::shared_ptr<Work> scatter(const Operation& operation) override;
  std::shared_ptr<Work> reduce_scatter(const Operation& operation) override;
  std::shared_ptr<Work> reduce_scatter_tensor(const Operation& operation) override;
  std::shared_ptr<Work> all_to_all(const Operation& operation) override;
  std::shared_ptr<Work> all_to_all_single(const Operation& operation) override;
  std::shared_ptr<Work> monitored_barrier(const Operation& operation) override;
  void start_coalescing() override;
  void end_coalescing() override;
  void shutdown() override;
  void abort(std::exception_ptr cause) override;

  // The device of this group's communicator, or -1 before it is made.
  int device() const { return state_->device; }

 private:
  // One operation as NCCL runs it: `enqueue(comm, stream)` makes NCCL's
  // calls on the NCCL stream (inside ncclGroupStart/End where it makes
  // several); the rest (sequence number, stream ordering, end event, flight
  // recorder, watchdog) is here.
  using Enqueue = std::function<void(ncclComm_t, cudaStream_t)>;
  struct Call {
    const char* op;
    Device device;                // of the operation's tensors
    std::vector<Tensor> result{};  // the Work's outputs
    std::vector<Tensor> keep{};    // the inputs, held until done
    std::chrono::milliseconds timeout = kGroupTimeout;
    bool p2p = false;
    int peer = -1;
    bool barrier = false;
  };
  // `operation`: the call as the front described it (its flight recorder entry).
  std::shared_ptr<Work> run(const Operation& operation, Call call, const Enqueue& enqueue);
  // Makes the communicator on `device` (-1: LOCAL_RANK's device, else the
  // current one) unless it exists; DistBackendError when the device differs
  // from the communicator's or there is no CUDA device.
  // `who` starts its errors ("rank 0 in group g: all_reduce #3").
  void ensure_comm(int device, const std::string& who);
  int pick_device(int requested, const std::string& who) const;
  void make_comm(int device, const std::string& who);
  std::chrono::milliseconds timeout_of(std::chrono::milliseconds t) const {
    return t == kGroupTimeout ? options_.timeout : t;
  }
  // "rank 3 in group g: all_reduce #5" for errors before a Work exists.
  std::string where(const char* op) const;
  // all_to_all and all_to_all_single: grouped sends and receives of the parts.
  std::shared_ptr<Work> exchange(const Operation& operation, const char* op, const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                                 std::chrono::milliseconds timeout);
  std::shared_ptr<Work> point_to_point(const Operation& operation, bool is_send, const Tensor& tensor, int peer, std::chrono::milliseconds timeout);

  std::shared_ptr<Store> store_;
  BackendOptions options_;
  std::shared_ptr<CommState> state_;
  std::shared_ptr<NcclBackend> parent_;  // until the communicator is made
  mutable std::mutex issue_mu_;         // issue order is the callers'; one enqueue at a time
  uint64_t seq_ = 0;                    // collectives issued
  uint64_t p2p_seq_ = 0;                // point-to-point operations issued
  // A batch: coalescing_ between start_coalescing and end_coalescing; open_
  // once its first operation started the NCCL group; its Works, not yet issued.
  bool coalescing_ = false;
  bool batch_open_ = false;
  std::vector<std::shared_ptr<NcclWork>> batch_;
  void fail_batch(std::exception_ptr error);
};

// Registers "nccl" for CUDA tensors (backends/backend_registry.cpp's built-ins).
void register_backend_entry();

}  // namespace tdist::nccl
