// A process group: its ranks, its backends (one per device type) and the
// operations it carries. The free functions of distributed.h act on one.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tdist/backend.h"

namespace tdist {

namespace trace {
class FlightRecorder;
}

class ProcessGroup;

struct ProcessGroupOptions {
  // "tdist", or a per-device spec like "cpu:tdist,cuda:nccl". "gloo" is an alias of "tdist".
  std::string backend = "tdist";
  std::chrono::milliseconds timeout = kUnsetTimeout;  // kUnsetTimeout: TDIST_TIMEOUT, else 30 min
  std::string group_name = "default_pg";
  // torch's group_desc: a label of the group for people (logs, dumps);
  // torch's new_group without one says "undefined", its default group "default_pg".
  std::string group_desc = "undefined";
  std::vector<int> global_ranks{};  // empty: 0..size-1
  // The device this rank uses (torch's device_id): its backend binds to it at
  // once (nccl: eager communicator init) rather than at the first operation.
  std::optional<Device> device_id{};
  // The group whose connections this one may reuse (new_group passes the
  // default group): each backend takes from its counterpart there what it
  // can share. Dropped once the group is made.
  std::shared_ptr<ProcessGroup> parent{};
  // For failed_ranks (BackendOptions): each member's rank as the launcher
  // started it (empty: its global rank), and the launcher's store of
  // exited/<rank> records (null: none).
  std::vector<int> launch_ranks{};
  std::shared_ptr<Store> death_records{};
  // For a group that replaces another (shrink_group): of the given ranks of
  // this group, those proven dead (by the old group's evidence), asked while
  // the group forms, so that a member that dies then ends the attempt at once
  // instead of at the timeout. Unset: only the timeout and death_records.
  std::function<std::vector<int>(const std::vector<int>& ranks)> members_gone{};
};

class ProcessGroup {
 public:
  // Creates the backends of `options.backend` over `store` (blocks until every rank joins).
  ProcessGroup(std::shared_ptr<Store> store, int rank, int size, ProcessGroupOptions options = {});
  // The handle a rank outside `global_ranks` gets from new_group: rank() is -1,
  // it has no backend, and operations on it are no-ops.
  static std::shared_ptr<ProcessGroup> non_member(std::vector<int> global_ranks, ProcessGroupOptions options);
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return rank_; }  // -1 for a non-member handle
  bool is_member() const { return rank_ >= 0; }
  int size() const { return size_; }
  const std::string& backend_name() const { return backend_spec_; }
  const std::string& group_name() const { return options_.group_name; }
  // The timeout of operations given none of their own.
  std::chrono::milliseconds timeout() const {
    return std::chrono::milliseconds(timeout_ms_.load(std::memory_order_relaxed));
  }
  // torch's ProcessGroup.set_timeout: operations issued afterwards without a
  // timeout of their own use this one (those under way keep theirs).
  // DistValueError for a negative timeout.
  void set_timeout(std::chrono::milliseconds timeout);
  const std::string& group_desc() const { return options_.group_desc; }
  const std::vector<int>& global_ranks() const { return options_.global_ranks; }
  const std::optional<Device>& device_id() const { return options_.device_id; }
  int global_rank(int group_rank) const;
  int group_rank(int global_rank) const;  // -1 when not a member
  const std::shared_ptr<Store>& store() const { return store_; }

  // The backend serving tensors of this device; DistValueError when none does.
  Backend& backend_for(Device device) const {
    if (device.type == DeviceType::CPU && cpu_backend_) return *cpu_backend_;
    return backend_found(device);
  }
  // The backend for device-independent operations (barrier): the CPU one if any.
  Backend& any_backend() const;

  // Issues `op` (tdist/operation.h: its kind, tensors and arguments, its
  // timeout as given, kGroupTimeout for the group's, and async_op): checked
  // once, recorded, and handed to the backend of its tensors' device
  // (Backend::run). The methods below build one each; an operation without a
  // method of its own (all_gather_coalesced) is issued through this.
  std::shared_ptr<Work> issue(Operation op);

  // Ranks are group ranks. Each operation takes its options struct
  // (tdist/options.h: its own arguments, a per-call timeout, async_op); the
  // shorter forms below it are the same with default options. Arguments are
  // checked here, once for every backend (DistValueError naming what is wrong).
  std::shared_ptr<Work> send(const Tensor& tensor, int dst, const SendOptions& opts);
  std::shared_ptr<Work> recv(const Tensor& tensor, int src, const RecvOptions& opts);
  // Blocking; blocking_recv returns the source (group rank).
  void blocking_send(const Tensor& tensor, int dst, const SendOptions& opts);
  int blocking_recv(const Tensor& tensor, int src, const RecvOptions& opts);
  std::shared_ptr<Work> broadcast(const Tensor& tensor, const BroadcastOptions& opts);
  std::shared_ptr<Work> all_reduce(const Tensor& tensor, const AllReduceOptions& opts);
  // Every tensor reduced in place, as one operation with one Work. The
  // tensors (at least one) share a dtype and device, as torch requires; their
  // sizes may differ.
  std::shared_ptr<Work> all_reduce_coalesced(const std::vector<Tensor>& tensors,
                                             const AllReduceCoalescedOptions& opts);
  std::shared_ptr<Work> barrier(const BarrierOptions& opts);
  std::shared_ptr<Work> reduce(const Tensor& tensor, const ReduceOptions& opts);
  std::shared_ptr<Work> all_gather(const std::vector<Tensor>& outputs, const Tensor& input,
                                   const AllGatherOptions& opts);
  std::shared_ptr<Work> all_gather_into_tensor(const Tensor& output, const Tensor& input,
                                               const AllGatherOptions& opts);
  std::shared_ptr<Work> gather(const std::vector<Tensor>& outputs, const Tensor& input, const GatherOptions& opts);
  std::shared_ptr<Work> scatter(const Tensor& output, const std::vector<Tensor>& inputs, const ScatterOptions& opts);
  std::shared_ptr<Work> reduce_scatter(const Tensor& output, const std::vector<Tensor>& inputs,
                                       const ReduceScatterOptions& opts);
  std::shared_ptr<Work> reduce_scatter_tensor(const Tensor& output, const Tensor& input,
                                              const ReduceScatterOptions& opts);
  std::shared_ptr<Work> all_to_all(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                                   const AllToAllOptions& opts);
  std::shared_ptr<Work> all_to_all_single(const Tensor& output, const Tensor& input, const AllToAllOptions& opts);
  std::shared_ptr<Work> monitored_barrier(const MonitoredBarrierOptions& opts);

  std::shared_ptr<Work> send(const Tensor& tensor, int dst, int tag = 0) { return send(tensor, dst, SendOptions{tag}); }
  std::shared_ptr<Work> recv(const Tensor& tensor, int src, int tag = 0) { return recv(tensor, src, RecvOptions{tag}); }
  void blocking_send(const Tensor& tensor, int dst, int tag = 0) {
    blocking_send(tensor, dst, SendOptions{.tag = tag, .async_op = false});
  }
  int blocking_recv(const Tensor& tensor, int src, int tag = 0) {
    return blocking_recv(tensor, src, RecvOptions{.tag = tag, .async_op = false});
  }
  std::shared_ptr<Work> broadcast(const Tensor& tensor, int root) { return broadcast(tensor, BroadcastOptions{root}); }
  std::shared_ptr<Work> all_reduce(const Tensor& tensor, ReduceOp op = ReduceOp::SUM) {
    return all_reduce(tensor, AllReduceOptions{op});
  }
  std::shared_ptr<Work> all_reduce_coalesced(const std::vector<Tensor>& tensors, ReduceOp op = ReduceOp::SUM) {
    return all_reduce_coalesced(tensors, AllReduceCoalescedOptions{op});
  }
  std::shared_ptr<Work> barrier() { return barrier(BarrierOptions{}); }
  std::shared_ptr<Work> reduce(const Tensor& tensor, int root, ReduceOp op = ReduceOp::SUM) {
    return reduce(tensor, ReduceOptions{root, op});
  }
  std::shared_ptr<Work> all_gather(const std::vector<Tensor>& outputs, const Tensor& input) {
    return all_gather(outputs, input, AllGatherOptions{});
  }
  std::shared_ptr<Work> all_gather_into_tensor(const Tensor& output, const Tensor& input) {
    return all_gather_into_tensor(output, input, AllGatherOptions{});
  }
  std::shared_ptr<Work> gather(const std::vector<Tensor>& outputs, const Tensor& input, int root) {
    return gather(outputs, input, GatherOptions{root});
  }
  std::shared_ptr<Work> scatter(const Tensor& output, const std::vector<Tensor>& inputs, int root) {
    return scatter(output, inputs, ScatterOptions{root});
  }
  std::shared_ptr<Work> reduce_scatter(const Tensor& output, const std::vector<Tensor>& inputs,
                                       ReduceOp op = ReduceOp::SUM) {
    return reduce_scatter(output, inputs, ReduceScatterOptions{op});
  }
  std::shared_ptr<Work> reduce_scatter_tensor(const Tensor& output, const Tensor& input, ReduceOp op = ReduceOp::SUM) {
    return reduce_scatter_tensor(output, input, ReduceScatterOptions{op});
  }
  std::shared_ptr<Work> all_to_all(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs) {
    return all_to_all(outputs, inputs, AllToAllOptions{});
  }
  std::shared_ptr<Work> all_to_all_single(const Tensor& output, const Tensor& input,
                                          const std::vector<int64_t>& output_split_sizes = {},
                                          const std::vector<int64_t>& input_split_sizes = {}) {
    return all_to_all_single(output, input, AllToAllOptions{output_split_sizes, input_split_sizes});
  }
  std::shared_ptr<Work> monitored_barrier(std::chrono::milliseconds timeout, bool wait_all_ranks = false) {
    return monitored_barrier(MonitoredBarrierOptions{timeout, wait_all_ranks});
  }
  // Shuts every backend down (pending operations fail).
  void shutdown();
  // Fails the group with `cause` (Backend::abort): what is under way ends
  // with it, later operations fail at once naming it, the peers are told.
  void abort(std::exception_ptr cause);
  // The group ranks that failed, the same on every survivor (tdist::failed_ranks).
  std::vector<int> failed_ranks(std::chrono::milliseconds silence);
  // Every backend of the group can shrink (torch's supports_shrinking).
  bool supports_shrinking() const;
  // Of the given ranks of this group, those proven dead now (their process is
  // gone: the launcher's record, its shared-memory line, its listener
  // refuses), without waiting or agreeing; for the group's replacement.
  std::vector<int> ranks_proven_dead(const std::vector<int>& ranks);
  // A shrink of this group was abandoned: failed_ranks asks anew.
  void shrink_abandoned();
  // Each member's rank as the launcher started it.
  const std::vector<int>& launch_ranks() const { return options_.launch_ranks; }
  const std::shared_ptr<Store>& death_records() const { return options_.death_records; }

 private:
  struct NonMemberTag {};
  ProcessGroup(NonMemberTag, std::vector<int> global_ranks, ProcessGroupOptions options);
  std::shared_ptr<Store> store_{};
  int rank_;
  int size_;
  ProcessGroupOptions options_;
  // options_.timeout, which set_timeout may change while other threads issue.
  std::atomic<int64_t> timeout_ms_{0};
  std::string backend_spec_{};
  // The group's flight recorder (null: TDIST_FLIGHT_RECORDER_ENTRIES=0, or not
  // a member). Before the backends: they may still end its entries while they
  // shut down.
  std::shared_ptr<trace::FlightRecorder> recorder_;
  std::vector<Backend*> distinct_backends() const;
  // A call's timeout: its own, else (kGroupTimeout) the group's.
  std::chrono::milliseconds resolved(std::chrono::milliseconds timeout) const {
    return timeout == kGroupTimeout ? this->timeout() : timeout;
  }
  Backend& backend_found(Device device) const;  // backend_for past the CPU backend
  std::map<DeviceType, std::shared_ptr<Backend>> backends_;  // one instance may serve several devices
  Backend* cpu_backend_ = nullptr;  // backends_[CPU], found without a map lookup on every call
};

}  // namespace tdist
