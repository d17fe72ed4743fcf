// Collectives in the host segment (host_segment.h): same contracts as the transport
// algorithms of algorithms/collective.h, for groups whose ranks share a host.
// Reductions combine the ranks' data in rank order 0, 1, ..., n-1 on every
// rank, so results are bitwise identical everywhere.
#pragma once

#include <vector>

#include "algorithms/collective.h"
#include "shm_engine/host_segment.h"

namespace tdist::shm_engine {

void barrier(HostSegment& a, CollectiveContext& ctx);
void broadcast(HostSegment& a, CollectiveContext& ctx, const Tensor& t, int root);
void all_reduce(HostSegment& a, CollectiveContext& ctx, const Tensor& t, ReduceOp op);
// Result on root only; the other ranks' tensors stay as given.
void reduce(HostSegment& a, CollectiveContext& ctx, const Tensor& t, int root, ReduceOp op);
// outputs[i] gets rank i's input (sizes may differ per rank, alike on every rank).
void all_gather(HostSegment& a, CollectiveContext& ctx, const std::vector<Tensor>& outputs, const Tensor& input);
void gather(HostSegment& a, CollectiveContext& ctx, const std::vector<Tensor>& outputs, const Tensor& input, int root);
void scatter(HostSegment& a, CollectiveContext& ctx, const Tensor& output, const std::vector<Tensor>& inputs, int root);
// output = op over every rank's inputs[rank()].
void reduce_scatter(HostSegment& a, CollectiveContext& ctx, const Tensor& output, const std::vector<Tensor>& inputs,
                    ReduceOp op);
// outputs[i] gets rank i's inputs[rank()].
void all_to_all(HostSegment& a, CollectiveContext& ctx, const std::vector<Tensor>& outputs,
                const std::vector<Tensor>& inputs);

}  // namespace tdist::shm_engine
