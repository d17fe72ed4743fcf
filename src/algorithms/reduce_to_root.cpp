// reduce: binomial tree (small), Rabenseifner (large, 4 ranks or more), or
// a pipelined chain (large, fewer ranks). The result lands on the root only;
// the other ranks work in scratch so their tensors stay as given.
#include "algorithms/binomial.h"
#include "algorithms/blocks.h"
#include "algorithms/butterfly.h"
#include "algorithms/collective.h"
#include "algorithms/pipeline.h"
#include "algorithms/selector.h"
#include "reduce/reduction_kernels.h"

namespace tdist::algorithms {

namespace {
// Where a rank reduces: the root's tensor itself, else a scratch copy.
struct Accumulator {
  Scratch scratch;
  char* data;
  Accumulator(const Tensor& t, bool is_root)
      : scratch(make_scratch(is_root ? 0 : t.nbytes())),
        data(is_root ? static_cast<char*>(t.data()) : scratch.get()) {
    if (!is_root) copy_bytes(data, t.data(), t.nbytes());
  }
};
}  // namespace

// Binomial tree toward the root: a rank receives the partial results of its
// children (nearest first), folds each in, and sends its own to its parent.
// log2(n) rounds, each moving the whole buffer.
void reduce_binomial_tree(CollectiveContext& ctx, const Tensor& t, int root, ReduceOp op) {
  const int n = ctx.size();
  const size_t bytes = t.nbytes(), count = static_cast<size_t>(t.numel());
  BinomialTree tree(n, (ctx.rank() - root + n) % n);
  Accumulator acc(t, tree.is_root());
  Scratch incoming = make_scratch(bytes);
  abort_on_error(ctx.transport, [&] {
    for (int c : tree.children()) {
      ctx.recv((c + root) % n, static_cast<uint32_t>(c - tree.v), incoming.get(), bytes);
      // The child's partial covers higher relative ranks: it is the right operand.
      reduction::combine(op, t.dtype(), acc.data, acc.data, incoming.get(), count);
    }
    if (!tree.is_root()) ctx.send((tree.parent() + root) % n, static_cast<uint32_t>(tree.low), acc.data, bytes);
  });
}

// Rabenseifner: recursive-halving reduce-scatter, then the parts are gathered
// on the root along a binomial tree. Each rank sends about 2x the buffer
// instead of log2(n)x. When the root is a folded-out rank, its partner
// collects the result and hands it over.
void reduce_rabenseifner(CollectiveContext& ctx, const Tensor& t, int root, ReduceOp op) {
  const size_t count = static_cast<size_t>(t.numel());
  Butterfly bf(ctx, op, t.dtype());
  const size_t parts = static_cast<size_t>(bf.pof2());
  auto bound = [&](int i) { return part_begin(count, parts, static_cast<size_t>(i)); };
  const bool is_root = ctx.rank() == root;
  Accumulator acc(t, is_root);
  Scratch tmp = make_scratch(t.nbytes());
  const int collector = bf.participant_of(root);
  abort_on_error(ctx.transport, [&] {
    bf.fold_in(acc.data, count, tmp.get());
    if (bf.participant() >= 0) {
      bf.reduce_scatter_halving(acc.data, bound, tmp.get());
      bf.gather_parts(acc.data, bound, collector);
    }
    // Rank 2i+1 collected for root 2i: hand the result over.
    if (bf.rank_of(collector) != root && (ctx.rank() == root || ctx.rank() == bf.rank_of(collector)))
      bf.fold_out(acc.data, acc.data, t.nbytes());
  });
}

// Chain root+1 -> root+2 -> ... -> root in segments: each rank folds a
// segment into the partial it received and passes it on while the next
// segments are still arriving, so the root reduces while data streams in
// (the tree reduces a whole buffer only once it arrived, out of cache).
// Every rank sends the buffer once; the time is one buffer plus n-2
// segments.
void reduce_chain(CollectiveContext& ctx, const Tensor& t, int root, ReduceOp op) {
  const int n = ctx.size(), v = (ctx.rank() - root + n) % n;
  const size_t count = static_cast<size_t>(t.numel()), esize = t.element_size();
  const size_t S = segments_for(count, esize, Pipeline::Chain, one_host(ctx));
  // Position in the chain: relative rank 1 starts it, the root (0) ends it.
  const int pos = (v + n - 1) % n;
  const bool first = pos == 0, last = pos == n - 1;
  // Middle ranks fold into scratch: their own tensor stays as given.
  Scratch partial = make_scratch(first || last ? 0 : t.nbytes());
  char* own = static_cast<char*>(t.data());
  char* acc = last ? own : partial.get();
  auto at = [&](char* base, size_t k) { return Span{base + part_begin(count, S, k) * esize, part_count(count, S, k)}; };
  SegmentStream st;
  // Chain position p is relative rank (p + 1) % n.
  st.from = first ? -1 : (root + pos) % n;
  st.to = last ? -1 : (root + pos + 2) % n;
  st.units = S;
  st.lag = 0;  // pass segment k on once it was folded
  st.esize = esize;
  st.send = [&](size_t k) { return at(first ? own : acc, k); };
  st.recv = [&](size_t k) { return at(acc, k); };
  // The incoming partial covers the chain positions before this rank.
  st.local = [&](size_t k) -> const char* { return at(own, k).data; };
  st.op = op;
  st.dtype = t.dtype();
  st.max_segment_count = part_count(count, S, 0);
  run_stream(ctx, st);
}

void reduce(CollectiveContext& ctx, const Tensor& t, int root, ReduceOp op) {
  using Fn = void (*)(CollectiveContext&, const Tensor&, int, ReduceOp);
  static constexpr Algorithm<Fn> kAlgorithms[] = {
      {"binomial", reduce_binomial_tree},
      {"rabenseifner", reduce_rabenseifner},
      {"chain", reduce_chain},
  };
  static_assert(lists_exactly(kAlgorithms, kReduceAlgorithms));
  const int n = ctx.size();
  const size_t count = static_cast<size_t>(t.numel());
  Fn run = select_algorithm(ctx, OpCode::Reduce, kAlgorithms,
                            [&] { return pick_transport(OpCode::Reduce, shape_of(ctx, t.nbytes(), count)); });
  if (n > 1 && count > 0) run(ctx, t, root, op);
  if (ctx.rank() == root && reduction::needs_finalize(op)) reduction::finalize(op, t.dtype(), t.data(), count, n);
}


}  // namespace tdist::algorithms
