// all_reduce: recursive doubling (small), Rabenseifner (medium), pipelined
// ring (large). Every rank gets a bitwise-identical result: recursive doubling
// reduces in an operand order all ranks share (reduce_ordered); the other two
// reduce each element on one rank only and then copy it to the others.
#include "tdist/errors.h"
#include "algorithms/blocks.h"
#include "algorithms/butterfly.h"
#include "algorithms/collective.h"
#include "algorithms/pipeline.h"
#include "algorithms/selector.h"
#include "reduce/reduction_kernels.h"

namespace tdist::algorithms {

// Fold the extra ranks in, exchange the whole buffer log2(pof2) times, fold
// out: the fewest rounds, best while the message is latency-bound.
void all_reduce_recursive_doubling(CollectiveContext& ctx, const Tensor& t, ReduceOp op) {
  const size_t count = static_cast<size_t>(t.numel());
  Butterfly bf(ctx, op, t.dtype());
  Scratch tmp = make_scratch(t.nbytes());
  abort_on_error(ctx.transport, [&] {
    bf.fold_in(t.data(), count, tmp.get());
    if (bf.participant() >= 0) bf.all_reduce_doubling(t.data(), count, tmp.get());
    bf.fold_out(t.data(), t.data(), t.nbytes());
  });
}

// Rabenseifner: recursive-halving reduce-scatter, then recursive-doubling
// all-gather. 2 log2(pof2) rounds moving 2(pof2-1)/pof2 of the buffer: fewer
// rounds than the ring at nearly its volume.
void all_reduce_rabenseifner(CollectiveContext& ctx, const Tensor& t, ReduceOp op) {
  const size_t count = static_cast<size_t>(t.numel());
  Butterfly bf(ctx, op, t.dtype());
  const size_t parts = static_cast<size_t>(bf.pof2());
  auto bound = [&](int i) { return part_begin(count, parts, static_cast<size_t>(i)); };
  Scratch tmp = make_scratch(t.nbytes());
  abort_on_error(ctx.transport, [&] {
    bf.fold_in(t.data(), count, tmp.get());
    if (bf.participant() >= 0) {
      bf.reduce_scatter_halving(t.data(), bound, tmp.get());
      bf.all_gather_doubling(t.data(), bound);
    }
    bf.fold_out(t.data(), t.data(), t.nbytes());
  });
}

// Ring reduce-scatter then all-gather, 2(n-1) steps each moving 1/n of the
// buffer (bandwidth-optimal), pipelined in segments: a segment is reduced and
// sent on while the next ones arrive. Every chunk is reduced in ring order,
// the incoming partial sum as the left operand.
void all_reduce_ring(CollectiveContext& ctx, const Tensor& t, ReduceOp op) {
  const int n = ctx.size();
  RingPlan plan = rank_ring(ctx, Blocks::split(t.data(), static_cast<size_t>(t.numel()), n, t.element_size()));
  plan.local = &plan.work;
  plan.first = 0;
  plan.end = 2 * (n - 1);
  plan.op = op;
  plan.dtype = t.dtype();
  run_ring(ctx, plan);
}

void all_reduce(CollectiveContext& ctx, const Tensor& t, ReduceOp op) {
  using Fn = void (*)(CollectiveContext&, const Tensor&, ReduceOp);
  static constexpr Algorithm<Fn> kAlgorithms[] = {
      {"recursive_doubling", all_reduce_recursive_doubling},
      {"rabenseifner", all_reduce_rabenseifner},
      {"ring", all_reduce_ring},
  };
  static_assert(lists_exactly(kAlgorithms, kAllReduceAlgorithms));
  const int n = ctx.size();
  const size_t count = static_cast<size_t>(t.numel());
  Fn run = select_algorithm(ctx, OpCode::AllReduce, kAlgorithms,
                            [&] { return pick_transport(OpCode::AllReduce, shape_of(ctx, t.nbytes(), count)); });
  if (n > 1 && count > 0) run(ctx, t, op);
  if (reduction::needs_finalize(op)) reduction::finalize(op, t.dtype(), t.data(), count, n);
}

}  // namespace tdist::algorithms
