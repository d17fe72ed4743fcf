// Layer 4: every collective as plain functions over a Transport. A function
// runs on every rank of the group with the same arguments (except data).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "tdist/reduce_op.h"
#include "tdist/tensor.h"
#include "transport/transport.h"
#include "algorithms/tags.h"

namespace tdist {

struct CollectiveContext {
  Transport& transport;
  uint64_t tag;       // collective_tag(op, seq): steps are added to it
  Deadline deadline;  // of the whole operation
  int rank() const { return transport.rank(); }
  int size() const { return transport.size(); }
  void send(int peer, uint32_t step, const void* data, size_t n) {
    transport.send(peer, step_tag(tag, step), data, n, deadline);
  }
  void recv(int peer, uint32_t step, void* data, size_t n) {
    transport.recv(peer, step_tag(tag, step), data, n, deadline);
  }
  // Exchanges with two peers at once (receive posted first): the building block
  // of rings and butterflies, deadlock-free whatever the socket buffer sizes.
  void send_recv(int to, const void* send_data, size_t send_n, int from, void* recv_data, size_t recv_n,
                 uint32_t step) {
    auto r = transport.irecv(from, step_tag(tag, step), recv_data, recv_n);
    auto s = transport.isend(to, step_tag(tag, step), send_data, send_n);
    transport.wait(*s, deadline);
    transport.wait(*r, deadline);
  }
};

// TDIST_DEBUG=DETAIL: all ranks compare `signature`; DistBackendError naming
// every rank's call when they differ.
void check_fingerprint(CollectiveContext& ctx, const std::string& signature);

// Algorithms may be forced with TDIST_ALGO_<COLLECTIVE> (e.g. TDIST_ALGO_ALL_REDUCE=ring).
std::string forced_algorithm(const char* collective);

void broadcast_binomial(CollectiveContext& ctx, const Tensor& t, int root);
void broadcast(CollectiveContext& ctx, const Tensor& t, int root);

void all_reduce_recursive_doubling(CollectiveContext& ctx, const Tensor& t, ReduceOp op);
void all_reduce_ring(CollectiveContext& ctx, const Tensor& t, ReduceOp op);
void all_reduce(CollectiveContext& ctx, const Tensor& t, ReduceOp op);

void barrier_dissemination(CollectiveContext& ctx);
// Rank 0 hears from every rank, then releases them; by ctx.deadline. Rank 0's
// error names the ranks that did not arrive (all, or the first).
void monitored_barrier(CollectiveContext& ctx, bool wait_all_ranks);

// Result on root only (in place); other ranks' tensors are left unchanged.
void reduce_binomial(CollectiveContext& ctx, const Tensor& t, int root, ReduceOp op);
// outputs[i] gets rank i's input; sizes may differ per rank but every rank
// passes the same sizes. outputs[rank] may alias input.
void all_gather(CollectiveContext& ctx, const std::vector<Tensor>& outputs, const Tensor& input);
// outputs only on the root.
void gather(CollectiveContext& ctx, const std::vector<Tensor>& outputs, const Tensor& input, int root);
// inputs only on the root.
void scatter(CollectiveContext& ctx, const Tensor& output, const std::vector<Tensor>& inputs, int root);
// output = op over every rank's inputs[rank()]; inputs[i] has rank i's output size.
void reduce_scatter(CollectiveContext& ctx, const Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op);
// outputs[i] gets rank i's inputs[rank()].
void all_to_all(CollectiveContext& ctx, const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs);

}  // namespace tdist
