// all_gather: Bruck (small, equal blocks), ring (large or uneven blocks).
#include "algorithms/blocks.h"
#include "algorithms/collective.h"
#include "algorithms/pipeline.h"
#include "algorithms/selector.h"
#include "util/bulk_copy.h"

namespace tdist::algorithms {

// Ring: in step s every rank forwards the block it received in step s-1 (its
// own first) to the right. n-1 steps, each moving one block per link (whole:
// see run_ring); blocks may differ in size (uneven all_gather).
void all_gather_ring(CollectiveContext& ctx, const std::vector<Tensor>& outputs, const Tensor& input) {
  const int n = ctx.size();
  bulk_copy(outputs[ctx.rank()].data(), input.data(), input.nbytes());
  RingPlan ring = rank_ring(ctx, Blocks::of(outputs));
  ring.first = n - 1;
  ring.end = 2 * (n - 1);
  run_ring(ctx, ring);
}

// Bruck: ceil(log2 n) rounds; in round k a rank sends the min(2^k, n - 2^k)
// blocks it holds to rank - 2^k and receives as many from rank + 2^k. Blocks
// are kept in an order rotated by the rank (slot i holds rank + i's block) so
// that each round moves one contiguous range; the end unrotates into the
// outputs. Needs blocks of one size: uneven all_gathers take the ring.
void all_gather_bruck(CollectiveContext& ctx, const std::vector<Tensor>& outputs, const Tensor& input) {
  const int n = ctx.size(), r = ctx.rank();
  Blocks out = Blocks::of(outputs);
  if (!out.equal_sizes()) return all_gather_ring(ctx, outputs, input);
  const size_t block = out.bytes(0);
  Scratch slots = make_scratch(block * static_cast<size_t>(n));
  copy_bytes(slots.get(), input.data(), block);
  abort_on_error(ctx.transport, [&] {
    uint32_t step = 0;
    for (int d = 1; d < n; d <<= 1, ++step) {
      const size_t moved = block * static_cast<size_t>(std::min(d, n - d));
      ctx.send_recv((r - d + n) % n, slots.get(), moved, (r + d) % n, slots.get() + block * d, moved, step);
    }
  });
  for (int i = 0; i < n; ++i) copy_bytes(out.span[(r + i) % n].data, slots.get() + block * i, block);
}

void all_gather(CollectiveContext& ctx, const std::vector<Tensor>& outputs, const Tensor& input) {
  using Fn = void (*)(CollectiveContext&, const std::vector<Tensor>&, const Tensor&);
  static constexpr Algorithm<Fn> kAlgorithms[] = {
      {"ring", all_gather_ring},
      {"bruck", all_gather_bruck},
  };
  static_assert(lists_exactly(kAlgorithms, kAllGatherAlgorithms));
  const Blocks out = Blocks::of(outputs);
  size_t total = 0;
  for (size_t i = 0; i < out.size(); ++i) total += out.bytes(i);
  Fn run = select_algorithm(ctx, OpCode::AllGather, kAlgorithms, [&] {
    Shape s = shape_of(ctx, total);
    s.equal_blocks = out.equal_sizes();
    return pick_transport(OpCode::AllGather, s);
  });
  if (ctx.size() == 1) return bulk_copy(outputs[0].data(), input.data(), input.nbytes());
  run(ctx, outputs, input);
}

}  // namespace tdist::algorithms
