// reduce_scatter: recursive halving (small), pipelined ring (large). Both are
// real reduce-scatters: each rank reduces only what it must, the inputs stay
// as given.
#include "algorithms/blocks.h"
#include "algorithms/butterfly.h"
#include "algorithms/collective.h"
#include "algorithms/pipeline.h"
#include "algorithms/selector.h"
#include "reduce/reduction_kernels.h"

namespace tdist::algorithms {

// Ring: in step s a rank sends its partial of block rank-s-1 to the right and
// folds the left neighbour's partial of block rank-s-2 into its own; after
// n-1 steps it holds the full reduction of its own block, reduced straight
// into the output. Partials of the other blocks live in scratch. Pipelined in
// segments; blocks may differ in size.
void reduce_scatter_ring(CollectiveContext& ctx, const Tensor& output, const std::vector<Tensor>& inputs,
                         ReduceOp op) {
  const int n = ctx.size(), r = ctx.rank();
  const Blocks local = Blocks::of(inputs);
  Blocks work = local;
  size_t total = 0;
  for (int i = 0; i < n; ++i) total += i == r ? 0 : local.bytes(i);
  Scratch partials = make_scratch(total);
  char* at = partials.get();
  for (int i = 0; i < n; ++i) {
    if (i == r) continue;
    work.span[i].data = at;
    at += local.bytes(i);
  }
  work.span[r].data = static_cast<char*>(output.data());
  RingPlan ring = rank_ring(ctx, std::move(work));
  ring.local = &local;
  ring.first = 0;
  ring.end = n - 1;
  ring.op = op;
  ring.dtype = output.dtype();
  run_ring(ctx, ring);
}

// Recursive halving over a contiguous copy of the inputs: log2(pof2) rounds,
// each sending half of what is still held. Folded pairs: the even rank hands
// all its inputs to the odd one, which stands for both and returns the even
// rank's block at the end. Blocks may differ in size.
void reduce_scatter_recursive_halving(CollectiveContext& ctx, const Tensor& output,
                                      const std::vector<Tensor>& inputs, ReduceOp op) {
  const int n = ctx.size(), r = ctx.rank();
  const size_t esize = output.element_size();
  std::vector<size_t> offset(n + 1, 0);  // elements
  for (int i = 0; i < n; ++i) offset[i + 1] = offset[i] + static_cast<size_t>(inputs[i].numel());
  Scratch work = make_scratch(offset[n] * esize), tmp = make_scratch(offset[n] * esize);
  for (int i = 0; i < n; ++i) copy_bytes(work.get() + offset[i] * esize, inputs[i].data(), inputs[i].nbytes());
  Butterfly bf(ctx, op, output.dtype());
  // Participant i's part: the blocks of the ranks it stands for.
  auto bound = [&](int i) { return offset[i == bf.pof2() ? n : bf.first_rank_of(i)]; };
  abort_on_error(ctx.transport, [&] {
    bf.fold_in(work.get(), offset[n], tmp.get());
    if (bf.participant() >= 0) bf.reduce_scatter_halving(work.get(), bound, tmp.get());
    // The odd rank of a pair sends the even rank's block, the even one receives its output.
    const int even = r - r % 2;
    bf.fold_out(work.get() + offset[even] * esize, output.data(), inputs[even].nbytes());
  });
  if (bf.participant() >= 0) copy_bytes(output.data(), work.get() + offset[r] * esize, output.nbytes());
}

void reduce_scatter(CollectiveContext& ctx, const Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op) {
  using Fn = void (*)(CollectiveContext&, const Tensor&, const std::vector<Tensor>&, ReduceOp);
  static constexpr Algorithm<Fn> kAlgorithms[] = {
      {"ring", reduce_scatter_ring},
      {"recursive_halving", reduce_scatter_recursive_halving},
  };
  static_assert(lists_exactly(kAlgorithms, kReduceScatterAlgorithms));
  const int n = ctx.size();
  size_t total = 0;
  for (const Tensor& t : inputs) total += t.nbytes();
  Fn run = select_algorithm(ctx, OpCode::ReduceScatter, kAlgorithms,
                            [&] { return pick_transport(OpCode::ReduceScatter, shape_of(ctx, total)); });
  if (n == 1)
    copy_bytes(output.data(), inputs[0].data(), output.nbytes());
  else
    run(ctx, output, inputs, op);
  if (reduction::needs_finalize(op))
    reduction::finalize(op, output.dtype(), output.data(), static_cast<size_t>(output.numel()), n);
}

}  // namespace tdist::algorithms
