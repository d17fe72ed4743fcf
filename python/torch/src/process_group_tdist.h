// ProcessGroupTdist: the c10d::Backend that torch.distributed gets for
// backend "tdist" (torch 2.x: a ProcessGroup holds one Backend per device
// type; this one serves "cpu", and "cuda" where the plugin is built with CUDA:
// torch then registers the one instance for both). Every operation is carried by a
// tdist::ProcessGroup (the tdist C++ library) built over torch's store for the
// group; tensors are handed over as views, without copies.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "tdist/process_group.h"
#include "work.h"

namespace tdist_torch {

class ProcessGroupTdist final : public c10d::Backend {
 public:
  // Blocks until every rank of the group has joined (or `timeout` passes).
  // `global_ranks`: the group's members as ranks of the default group (empty: 0..size-1).
  ProcessGroupTdist(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, std::chrono::milliseconds timeout,
                    std::string group_name, std::vector<int> global_ranks);
  // Over a group the tdist library already made (shrink's).
  ProcessGroupTdist(std::shared_ptr<tdist::ProcessGroup> pg, std::chrono::milliseconds timeout);
  ~ProcessGroupTdist() override;

  const std::string getBackendName() const override { return "tdist"; }
  const std::string& groupName() const { return pg_->group_name(); }
  // What torch clones for split_group's children: name, timeout, members.
  c10::intrusive_ptr<c10d::Backend::Options> getBackendOptions() override;
  // split_group / new_group over this group: every member of this group
  // calls it; those outside `ranks` (ranks of this group) get null.
  bool supportsSplitting() const override { return true; }
  c10::intrusive_ptr<c10d::Backend> split(const c10::intrusive_ptr<c10d::Store>& store, const std::vector<int>& ranks,
                                          const c10::intrusive_ptr<c10d::Backend::Options>& opts) override;
  // abort fails what is under way (Backend::abort of the C++ library) and
  // every later call; shutdown ends the group after it drained.
  void abort() override;
  void shutdown() override;
  // torch's shrink_group over this group: the survivors' new backend
  // (tdist::shrink_group: same guarantees, all or nothing).
  bool supportsShrinking() const override { return true; }
  c10::intrusive_ptr<c10d::Backend> shrink(const std::vector<int64_t>& ranks_to_exclude, int shrink_flags,
                                           const c10::intrusive_ptr<Options>& opts_override) override;
  // The ranks of this group that failed, the same on every survivor (tdist::failed_ranks).
  std::vector<int> failed_ranks(std::chrono::milliseconds silence);

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_sparse(std::vector<at::Tensor>& tensors,
                                                  const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& output_lists,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  // The coalesced forms (torch's _coalescing_manager, FSDP): one tdist
  // operation per pair, issued back to back, one Work for all.
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) override;
#ifdef TDIST_TORCH_HAS_GATHER_INTO_TENSOR
  // gather into one flat tensor on the destination (world_size inputs, in rank order); where
  // torch's Backend has it (python/torch/CMakeLists.txt).
  c10::intrusive_ptr<c10d::Work> gather_into_tensor(at::Tensor& output, at::Tensor& input,
                                                    const c10d::GatherOptions& opts) override;
#endif
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_split_sizes,
                                               std::vector<int64_t>& input_split_sizes,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) override;

  // Every rank counts the collectives it issues from 0, so the numbers agree
  // without a round trip through the store.
  void setSequenceNumberForGroup() override {}
  uint64_t getSequenceNumberForGroup() override;

 private:
  // Wraps the tdist Works of one operation, remembers it until it completes
  // (so its tensors outlive a dropped handle), and counts collectives.
  // `span`: the operation's torch.profiler span (ProfilerSpan::open, called
  // before the operation was issued; null when no profiler runs).
  c10::intrusive_ptr<WorkTdist> track(c10d::OpType type, const char* op, std::shared_ptr<ProfilerSpan> span,
                                       std::vector<std::shared_ptr<tdist::Work>> works, std::vector<at::Tensor> outputs,
                                       std::vector<at::Tensor> inputs = {});
  // all_reduce of a sparse COO tensor, as Gloo does it (SUM only).
  c10::intrusive_ptr<c10d::Work> sparse_all_reduce(std::vector<at::Tensor>& tensors,
                                                   const c10d::AllreduceOptions& opts,
                                                   std::shared_ptr<ProfilerSpan> span);
  // The one tensor of `tensors` (torch passes lists; CPU backends take one per process).
  const at::Tensor& single(const std::vector<at::Tensor>& tensors, const std::string& op, const char* what) const;
  int root(int64_t rank, const std::string& op, const char* what) const;
  // The context errors start with: "rank 1 in group default_pg: all_reduce".
  std::string where(const char* op) const;
  static std::string label_of(const tdist::ProcessGroup& pg);  // "rank 1 in group default_pg: "

  std::chrono::milliseconds timeout_;  // the group's, for getBackendOptions
  std::mutex mu_;
  std::vector<c10::intrusive_ptr<WorkTdist>> in_flight_;
  uint64_t collectives_ = 0;
  // Declared after in_flight_ so it is destroyed before: its shutdown fails
  // what is still in flight before in_flight_ lets go of the tensors.
  std::shared_ptr<tdist::ProcessGroup> pg_;
  const std::string label_;  // label_of(*pg_), made once
};

}  // namespace tdist_torch
