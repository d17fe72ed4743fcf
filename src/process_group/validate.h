// The arguments of every operation, checked once in the front for every
// backend: a backend receives only what passed (see Backend in
// tdist/backend.h). Each check throws DistValueError("rank 3 in group g:
// all_gather: output list has 3 tensors, expected 4 (one per rank)"); the
// text is built only on failure.
#pragma once

#include <cstdint>
#include <vector>

#include "tdist/operation.h"
#include "tdist/options.h"
#include "tdist/process_group.h"

namespace tdist::validate {

void point_to_point(const ProcessGroup& g, const Tensor& tensor, int peer, bool is_send,
                    std::chrono::milliseconds timeout);
void broadcast(const ProcessGroup& g, const Tensor& tensor, const BroadcastOptions& opts);
void all_reduce(const ProcessGroup& g, const Tensor& tensor, const AllReduceOptions& opts);
void all_reduce_coalesced(const ProcessGroup& g, const std::vector<Tensor>& tensors,
                          const AllReduceCoalescedOptions& opts);
void reduce(const ProcessGroup& g, const Tensor& tensor, const ReduceOptions& opts);
void all_gather(const ProcessGroup& g, const std::vector<Tensor>& outputs, const Tensor& input,
                const AllGatherOptions& opts);
void all_gather_into_tensor(const ProcessGroup& g, const Tensor& output, const Tensor& input,
                            const AllGatherOptions& opts);
void gather(const ProcessGroup& g, const std::vector<Tensor>& outputs, const Tensor& input, const GatherOptions& opts);
void scatter(const ProcessGroup& g, const Tensor& output, const std::vector<Tensor>& inputs,
             const ScatterOptions& opts);
void reduce_scatter(const ProcessGroup& g, const Tensor& output, const std::vector<Tensor>& inputs,
                    const ReduceScatterOptions& opts);
void reduce_scatter_tensor(const ProcessGroup& g, const Tensor& output, const Tensor& input,
                           const ReduceScatterOptions& opts);
void all_to_all(const ProcessGroup& g, const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                const AllToAllOptions& opts);
void all_to_all_single(const ProcessGroup& g, const Tensor& output, const Tensor& input, const AllToAllOptions& opts);
void timeout(const ProcessGroup& g, const char* op, std::chrono::milliseconds timeout);
// An operation issued through ProcessGroup::issue, by its kind.
void operation(const ProcessGroup& g, const Operation& op);

}  // namespace tdist::validate
