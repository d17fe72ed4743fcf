// The "tdist" backend: CPU tensors. Point-to-point goes over the transport;
// each collective runs in the engine and algorithm the selector decides once
// for its call, among the group's engines that the engine builder assembled
// when the group was made (src/engines: the shared-memory engine when every
// rank is on this host, the hierarchical engine when the group spans hosts
// with several ranks on some, else the transport engine's algorithms). CUDA tensors take the device data
// paths of src/backends/device_path (staging through pinned host memory).
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <span>
#include <string>

#include "tdist/backend.h"
#include "algorithms/collective.h"
#include "backends/device_path/device_path.h"
#include "backends/device_path/ipc_collectives.h"
#include "backends/device_path/ipc_exchange.h"
#include "backends/failure_agreement.h"
#include "backends/work_queue.h"
#include "work/spare_work.h"
#include "engines/group_engines.h"
#include "transport/mesh.h"
#include "transport/transport.h"
#include "util/spin_lock.h"

namespace tdist {

static_assert(kAnySource == kAnySender, "the transport's any-peer must be the API's kAnySource");

class TdistBackend final : public Backend {
 public:
  TdistBackend(const std::shared_ptr<Store>& store, int rank, int size, const BackendOptions& options);
  ~TdistBackend() override;

  std::string name() const override { return "tdist"; }
  uint64_t next_sequence_number() const override {
    std::lock_guard<SpinLock> issue(issue_mu_);
    return seq_ + 1;
  }
  std::shared_ptr<Work> send(const Operation& op) override;
  std::shared_ptr<Work> recv(const Operation& op) override;
  void blocking_send(const Operation& op) override;
  int blocking_recv(const Operation& op) override;
  std::shared_ptr<Work> broadcast(const Operation& op) override;
  std::shared_ptr<Work> all_reduce(const Operation& op) override;
  std::shared_ptr<Work> all_reduce_coalesced(const Operation& op) override;
  std::shared_ptr<Work> barrier(const Operation& op) override;
  std::shared_ptr<Work> reduce(const Operation& op) override;
  std::shared_ptr<Work> all_gather(const Operation& op) override;
  std::shared_ptr<Work> all_gather_into_tensor(const Operation& op) override;
  std::shared_ptr<Work> gather(const Operation& op) override;
  std::shared_ptr<Work> scatter(const Operation& op) override;
  std::shared_ptr<Work> reduce_scatter(const Operation& op) override;
  std::shared_ptr<Work> reduce_scatter_tensor(const Operation& op) override;
  std::shared_ptr<Work> all_to_all(const Operation& op) override;
  std::shared_ptr<Work> all_to_all_single(const Operation& op) override;
  std::shared_ptr<Work> monitored_barrier(const Operation& op) override;
  void shutdown() override;
  void abort(std::exception_ptr cause) override;
  bool supports_shrinking() const override { return true; }
  std::vector<int> failed_ranks(std::chrono::milliseconds silence) override;
  void shrink_abandoned() override;
  std::vector<int> ranks_proven_dead(const std::vector<int>& ranks) override;
  // The engine that runs `code`'s collective of `bytes` in this group ("transport",
  // "shm", "hierarchical"): for tests and diagnostics.
  const char* engine_name(OpCode code, size_t bytes) const { return engine_for(code, {bytes}).engine->name(); }

  // The default group's connections, shared by every group made from it.
  struct SharedLinks {
    std::shared_ptr<Mesh> transport;
    std::shared_ptr<Store> store;  // counts the communicator ids (agree_comm_id)
    std::mutex mu;
    // The first group failure, with its group's context: the cause the
    // other groups report (the transport's own abort cause may lack it).
    std::exception_ptr first_failure;
    void note_failure(const std::exception_ptr& e);
    std::exception_ptr cause();  // first_failure, else the transport's abort cause
  };

  // Shared with the Works of point-to-point operations, which may outlive calls.
  struct State {
    std::string label;  // "rank 3 in group default_pg"
    std::shared_ptr<const std::string> shared_label;  // the same, for the works of this group
    // The group's transport: the process's shared one (the default group's
    // Mesh), or a communicator over it (every other group).
    std::shared_ptr<Transport> transport;
    // What the groups of a process share; null when this group's ranks are
    // not the default group's (then groups made from it connect anew).
    std::shared_ptr<SharedLinks> links;
    // The group's engines, its segments, the forced algorithms and its
    // placement, as the engine builder made them (engines/engine_builder.h).
    std::unique_ptr<GroupEngines> engines;
    // Who failed, as the survivors agree: one per mesh (a group over the
    // shared connections uses the default group's), with its evidence.
    std::shared_ptr<FailureAgreement> agreement;
    FailureAgreement::Evidence evidence;
    FailureAgreement::Probe probe;
    std::vector<int> mesh_ranks;  // group rank -> the agreement's (the mesh's) rank
    std::mutex mu;
    std::exception_ptr failure;  // the first failure; later operations fail fast with it
    std::atomic<bool> failed{false};  // failure is set: lets the hot path skip the lock
    // The failure, with context, for operation `op` #seq (seq 0: none); null
    // while the group is healthy (two loads, on the path of every call).
    std::exception_ptr failure_of(const char* op, uint64_t seq = 0) {
      if (!failed.load(std::memory_order_acquire) && (!links || !links->transport->stopped())) return nullptr;
      return failure_found(op, seq);
    }
    std::exception_ptr failure_found(const char* op, uint64_t seq);  // failure_of's slow path
    void record_failure(std::exception_ptr e);
  };

 private:
  // Issues collective `op`: body(ctx, args...) runs on the caller's thread
  // for a blocking call when the queue is idle (args used in place), else on
  // the queue's thread (over copies of args). `signature` is "" unless
  // TDIST_DEBUG=DETAIL. `seqs`: the sequence numbers the operation takes, one
  // per collective it runs (the body derives the later ones' tags from the
  // first).
  Millis timeout_of(Millis requested) const { return requested == kGroupTimeout ? options_.timeout : requested; }
  template <typename Body, typename... Args>
  std::shared_ptr<Work> enqueue(CollectiveCall code, const Operation& op, std::span<const Tensor> result, int seqs,
                                std::string signature, Body body, const Args&... args);
  // enqueue() for an operation on device tensors (`any` is one of them):
  // always on the queue's thread, staged (backends/device_path/staging.h),
  // completed through a DeviceWork.
  template <typename Body, typename... Args>
  std::shared_ptr<Work> enqueue_on_device(CollectiveCall code, const Operation& op, std::span<const Tensor> result,
                                          int seqs, std::string signature, Body body, const Tensor& any,
                                          const Args&... args);
  // send/recv (op.kind) of a device tensor, staged through pinned host memory.
  std::shared_ptr<Work> device_point_to_point(const Operation& op);
  // The engine and algorithm of `code`'s collective of `size` in this group:
  // the call's one decision (GroupEngines::call).
  EngineCall engine_for(OpCode code, CallSize size) const { return engines_->call(code, size); }
  // send/recv (op.kind) of `tensor` (op's, or its host copy for a device tensor).
  std::shared_ptr<Work> point_to_point(const Operation& op, const Tensor& tensor);
  int blocking_point_to_point(const Operation& op);
  // The first of `count` new communicator ids, the same on every member
  // (`key`: the group store's key that carries it).
  static uint32_t agree_comm_id(Store& group_store, Store& links_store, int rank, int size, Millis timeout,
                                const std::string& key = "comm_id", int count = 1);
  // Checks the group; returns the operation's sequence number.
  uint64_t start_point_to_point(bool is_send);

  BackendOptions options_;
  std::shared_ptr<State> state_;
  bool debug_detail_ = false;  // TDIST_DEBUG=DETAIL: check every collective's signature first
  // TDIST_ASYNC_DEFER_BYTES: async collectives up to this size do not wake the queue's thread.
  size_t async_defer_bytes_ = 0;
  const GroupEngines* engines_ = nullptr;  // state_->engines: see engine_for()
  uint64_t seq_ = 0;      // collectives issued
  std::atomic<uint64_t> p2p_seq_{0};  // point-to-point operations issued
  mutable SpinLock issue_mu_;  // issuing is thread-safe; order is the caller's
  SpareWork spare_;  // recent calls' Works, reused; guarded by issue_mu_
  // Streams, events and pinned scratch of device operations; shared with
  // their queued bodies and Works.
  std::shared_ptr<DevicePath> device_path_;
  // The same-host IPC path's exchange buffers (set up at its first use), and
  // TDIST_CUDA_PATH as the group was created.
  std::shared_ptr<IpcExchange> ipc_exchange_;
  ipc::PathChoice cuda_path_ = ipc::PathChoice::Auto;
  // Shared with its works, whose waiters run what is queued (WorkQueue::run_through).
  const std::shared_ptr<WorkQueue> queue_ = std::make_shared<WorkQueue>();
};

}  // namespace tdist
