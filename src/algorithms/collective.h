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
#include "algorithms/decision.h"

namespace tdist {

// Where a group's ranks run; the same on every rank of the group.
struct Placement {
  int hosts = 1;           // distinct hosts
  int ranks_per_host = 1;  // the most ranks on one host
  bool one_host() const { return hosts == 1; }
};
// The group's ranks by host: one list per host (in order of each host's
// lowest rank), each in rank order. Alike on every rank. One host_of call per
// rank: a group asks once, when it is made.
std::vector<std::vector<int>> ranks_by_host(const Transport& transport);
Placement placement_of(const Transport& transport);

struct CollectiveContext {
  Transport& transport;
  uint64_t tag;       // collective_tag(op, seq): steps are added to it
  Deadline deadline;  // of the whole operation
  // The group's TDIST_ALGO_* settings, checked when it was made; null: read
  // the environment at each pick (algorithms run alone, in tests).
  const ForcedAlgorithms* forced = nullptr;
  // The group's placement; null: counted from the transport at each pick.
  const Placement* placement = nullptr;
  // The ranks awaited are likely still on the network (a step inside a host
  // after one among hosts): a shared-memory wait spins only briefly before
  // it sleeps, leaving the cores to the ranks that work.
  bool patient = false;
  // The selector's decision for this call, made once where the call was
  // issued; undecided for the steps an engine runs (each picks for itself).
  const Decision decision{};
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

// Algorithms may be forced with TDIST_ALGO_<COLLECTIVE> (e.g. TDIST_ALGO_ALL_REDUCE=ring):
// the lower-cased value, "" when unset. Each collective below picks with the
// selector (selector.h) and accepts the names listed with it.
std::string forced_algorithm(const char* collective);

// The collectives' algorithms and their entry points (which run the call's
// decision, else the forced or the automatic pick), in a namespace of their
// own: they never overload the public API's tdist::all_reduce and its kin.
namespace algorithms {

// broadcast: binomial, scatter_allgather, chain.
void broadcast_binomial(CollectiveContext& ctx, const Tensor& t, int root);
void broadcast_scatter_allgather(CollectiveContext& ctx, const Tensor& t, int root);
void broadcast_chain(CollectiveContext& ctx, const Tensor& t, int root);
void broadcast(CollectiveContext& ctx, const Tensor& t, int root);

// all_reduce: recursive_doubling, rabenseifner, ring.
void all_reduce_recursive_doubling(CollectiveContext& ctx, const Tensor& t, ReduceOp op);
void all_reduce_rabenseifner(CollectiveContext& ctx, const Tensor& t, ReduceOp op);
void all_reduce_ring(CollectiveContext& ctx, const Tensor& t, ReduceOp op);
void all_reduce(CollectiveContext& ctx, const Tensor& t, ReduceOp op);

void barrier_dissemination(CollectiveContext& ctx);
// Rank 0 hears from every rank, then releases them; by ctx.deadline. Rank 0's
// error names the ranks that did not arrive (all, or the first).
void monitored_barrier(CollectiveContext& ctx, bool wait_all_ranks);

// reduce: binomial, rabenseifner. Result on root only (in place); other
// ranks' tensors are left unchanged.
void reduce_binomial_tree(CollectiveContext& ctx, const Tensor& t, int root, ReduceOp op);
void reduce_rabenseifner(CollectiveContext& ctx, const Tensor& t, int root, ReduceOp op);
void reduce_chain(CollectiveContext& ctx, const Tensor& t, int root, ReduceOp op);
void reduce(CollectiveContext& ctx, const Tensor& t, int root, ReduceOp op);

// all_gather: ring, bruck. outputs[i] gets rank i's input; sizes may differ
// per rank (bruck then runs the ring) but every rank passes the same sizes.
// outputs[rank] may alias input.
void all_gather_ring(CollectiveContext& ctx, const std::vector<Tensor>& outputs, const Tensor& input);
void all_gather_bruck(CollectiveContext& ctx, const std::vector<Tensor>& outputs, const Tensor& input);
void all_gather(CollectiveContext& ctx, const std::vector<Tensor>& outputs, const Tensor& input);

// gather, scatter: linear, binomial. Every rank's block has the same size.
// gather: outputs only on the root.
void gather_linear(CollectiveContext& ctx, const std::vector<Tensor>& outputs, const Tensor& input, int root);
void gather_binomial(CollectiveContext& ctx, const std::vector<Tensor>& outputs, const Tensor& input, int root);
void gather(CollectiveContext& ctx, const std::vector<Tensor>& outputs, const Tensor& input, int root);
// scatter: inputs only on the root.
void scatter_linear(CollectiveContext& ctx, const Tensor& output, const std::vector<Tensor>& inputs, int root);
void scatter_binomial(CollectiveContext& ctx, const Tensor& output, const std::vector<Tensor>& inputs, int root);
void scatter(CollectiveContext& ctx, const Tensor& output, const std::vector<Tensor>& inputs, int root);

// reduce_scatter: ring, recursive_halving. output = op over every rank's
// inputs[rank()]; inputs[i] has rank i's output size (sizes may differ).
void reduce_scatter_ring(CollectiveContext& ctx, const Tensor& output, const std::vector<Tensor>& inputs,
                         ReduceOp op);
void reduce_scatter_recursive_halving(CollectiveContext& ctx, const Tensor& output,
                                      const std::vector<Tensor>& inputs, ReduceOp op);
void reduce_scatter(CollectiveContext& ctx, const Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op);

// all_to_all: pairwise, bruck, linear. outputs[i] gets rank i's inputs[rank()].
// uniform: the caller guarantees that every block of every rank has one size
// (all_to_all_single without split sizes); only then may the selector pick
// bruck, which needs it.
void all_to_all_pairwise(CollectiveContext& ctx, const std::vector<Tensor>& outputs,
                         const std::vector<Tensor>& inputs);
void all_to_all_bruck(CollectiveContext& ctx, const std::vector<Tensor>& outputs,
                      const std::vector<Tensor>& inputs);
void all_to_all_linear(CollectiveContext& ctx, const std::vector<Tensor>& outputs,
                       const std::vector<Tensor>& inputs);
void all_to_all(CollectiveContext& ctx, const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                bool uniform = false);

}  // namespace algorithms

}  // namespace tdist
