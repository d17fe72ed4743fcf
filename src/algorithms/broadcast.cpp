// broadcast: binomial tree (small), scatter + ring all-gather (van de Geijn),
// or a pipelined chain (large).
#include "algorithms/binomial.h"
#include "algorithms/blocks.h"
#include "algorithms/collective.h"
#include "algorithms/pipeline.h"
#include "algorithms/selector.h"

namespace tdist::algorithms {

namespace {
int relative(CollectiveContext& ctx, int root) { return (ctx.rank() - root + ctx.size()) % ctx.size(); }
int absolute(CollectiveContext& ctx, int root, int v) { return (v + root) % ctx.size(); }
}  // namespace

// log2(n) rounds, each rank receiving the whole buffer once from its parent
// and sending it to its children, farthest subtree first.
void broadcast_binomial(CollectiveContext& ctx, const Tensor& t, int root) {
  BinomialTree tree(ctx.size(), relative(ctx, root));
  if (!tree.is_root()) ctx.recv(absolute(ctx, root, tree.parent()), 0, t.data(), t.nbytes());
  auto children = tree.children();
  for (auto c = children.rbegin(); c != children.rend(); ++c) ctx.send(absolute(ctx, root, *c), 0, t.data(), t.nbytes());
}

// van de Geijn: the root's buffer, cut into n parts (part v for relative
// position v), is scattered down the binomial tree (each rank receives the
// parts of its subtree), then a ring all-gather completes every rank. About
// 2x the buffer per rank instead of log2(n)x.
void broadcast_scatter_allgather(CollectiveContext& ctx, const Tensor& t, int root) {
  const int n = ctx.size();
  const size_t count = static_cast<size_t>(t.numel()), esize = t.element_size();
  BinomialTree tree(n, relative(ctx, root));
  Blocks parts = Blocks::split(t.data(), count, n, esize);
  // Parts [first, end) are contiguous: one message.
  auto bytes = [&](int first, int end) { return (part_begin(count, n, end) - part_begin(count, n, first)) * esize; };
  if (!tree.is_root())
    ctx.recv(absolute(ctx, root, tree.parent()), 0, parts.span[tree.v].data, bytes(tree.v, tree.subtree_end()));
  auto children = tree.children();
  for (auto c = children.rbegin(); c != children.rend(); ++c)
    ctx.send(absolute(ctx, root, *c), 0, parts.span[*c].data, bytes(*c, BinomialTree::subtree_end_of(*c, tree.v, n)));
  RingPlan ring;
  ring.pos = tree.v;
  ring.left = absolute(ctx, root, (tree.v - 1 + n) % n);
  ring.right = absolute(ctx, root, (tree.v + 1) % n);
  ring.work = std::move(parts);
  ring.first = n - 1;
  ring.end = 2 * (n - 1);
  ring.first_step = 1;
  run_ring(ctx, ring);
}

// Chain root -> root+1 -> ... in segments: each rank forwards a segment as
// soon as it arrived, so the time is one buffer plus (n-2) segments.
void broadcast_chain(CollectiveContext& ctx, const Tensor& t, int root) {
  const int n = ctx.size(), v = relative(ctx, root);
  const size_t count = static_cast<size_t>(t.numel()), esize = t.element_size();
  const size_t S = segments_for(count, esize, Pipeline::Chain);
  auto segment = [&](size_t k) {
    return Span{static_cast<char*>(t.data()) + part_begin(count, S, k) * esize, part_count(count, S, k)};
  };
  SegmentStream st;
  st.from = v > 0 ? absolute(ctx, root, v - 1) : -1;
  st.to = v < n - 1 ? absolute(ctx, root, v + 1) : -1;
  st.units = S;
  st.lag = 0;  // forward segment k once it arrived
  st.esize = esize;
  st.send = segment;
  st.recv = segment;
  run_stream(ctx, st);
}

void broadcast(CollectiveContext& ctx, const Tensor& t, int root) {
  using Fn = void (*)(CollectiveContext&, const Tensor&, int);
  static constexpr Algorithm<Fn> kAlgorithms[] = {
      {"binomial", broadcast_binomial},
      {"scatter_allgather", broadcast_scatter_allgather},
      {"chain", broadcast_chain},
  };
  static_assert(lists_exactly(kAlgorithms, kBroadcastAlgorithms));
  const size_t count = static_cast<size_t>(t.numel());
  Fn run = select_algorithm(ctx, OpCode::Broadcast, kAlgorithms,
                            [&] { return pick_transport(OpCode::Broadcast, shape_of(ctx, t.nbytes(), count)); });
  if (ctx.size() > 1 && count > 0) run(ctx, t, root);
}

}  // namespace tdist::algorithms
