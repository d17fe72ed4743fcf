// gather and scatter: binomial tree (small blocks: log2(n) rounds instead of
// n-1 messages at the root) or linear (large blocks: the root's link carries
// every block once either way, and the tree would forward them again).
#include <memory>
#include <vector>

#include "algorithms/binomial.h"
#include "algorithms/blocks.h"
#include "algorithms/collective.h"
#include "algorithms/selector.h"
#include "util/bulk_copy.h"

namespace tdist::algorithms {

namespace {

void wait_all(CollectiveContext& ctx, const std::vector<std::shared_ptr<Request>>& reqs) {
  for (const auto& r : reqs) ctx.transport.wait(*r, ctx.deadline);
}

// A rank's place in the tree rooted at `root`, and its subtree's blocks.
struct TreeBlocks {
  int n, root;
  BinomialTree tree;
  size_t block;  // bytes per rank
  TreeBlocks(CollectiveContext& ctx, int root_rank, size_t block_bytes)
      : n(ctx.size()), root(root_rank), tree(n, (ctx.rank() - root_rank + n) % n), block(block_bytes) {}
  int rank_at(int v) const { return (v + root) % n; }
  // Child c's subtree, as a byte range of this rank's subtree buffer.
  size_t offset_of(int c) const { return static_cast<size_t>(c - tree.v) * block; }
  size_t bytes_of(int c) const { return static_cast<size_t>(BinomialTree::subtree_end_of(c, tree.v, n) - c) * block; }
  size_t subtree_bytes() const { return static_cast<size_t>(tree.subtree_end() - tree.v) * block; }
};

}  // namespace

// The root posts a receive per rank, straight into the outputs.
void gather_linear(CollectiveContext& ctx, const std::vector<Tensor>& outputs, const Tensor& input, int root) {
  if (ctx.rank() != root) return ctx.send(root, 0, input.data(), input.nbytes());
  std::vector<std::shared_ptr<Request>> reqs;
  for (int r = 0; r < ctx.size(); ++r)
    if (r != root) reqs.push_back(ctx.transport.irecv(r, step_tag(ctx.tag, 0), outputs[r].data(), outputs[r].nbytes()));
  bulk_copy(outputs[root].data(), input.data(), input.nbytes());
  wait_all(ctx, reqs);
}

// Each rank collects its subtree's blocks (in relative rank order, so one
// message per child) and passes them to its parent.
void gather_binomial(CollectiveContext& ctx, const std::vector<Tensor>& outputs, const Tensor& input, int root) {
  TreeBlocks tb(ctx, root, input.nbytes());
  const auto children = tb.tree.children();
  if (children.empty()) return ctx.send(tb.rank_at(tb.tree.parent()), static_cast<uint32_t>(tb.tree.low), input.data(), tb.block);
  Scratch buf = make_scratch(tb.subtree_bytes());
  copy_bytes(buf.get(), input.data(), tb.block);
  abort_on_error(ctx.transport, [&] {
    std::vector<std::shared_ptr<Request>> reqs;
    for (int c : children)
      reqs.push_back(ctx.transport.irecv(tb.rank_at(c), step_tag(ctx.tag, static_cast<uint32_t>(c - tb.tree.v)),
                                         buf.get() + tb.offset_of(c), tb.bytes_of(c)));
    wait_all(ctx, reqs);
    if (!tb.tree.is_root())
      ctx.send(tb.rank_at(tb.tree.parent()), static_cast<uint32_t>(tb.tree.low), buf.get(), tb.subtree_bytes());
  });
  if (tb.tree.is_root())
    for (int v = 0; v < tb.n; ++v) copy_bytes(outputs[tb.rank_at(v)].data(), buf.get() + v * tb.block, tb.block);
}

// The root posts a send per rank, straight from the inputs.
void scatter_linear(CollectiveContext& ctx, const Tensor& output, const std::vector<Tensor>& inputs, int root) {
  if (ctx.rank() != root) return ctx.recv(root, 0, output.data(), output.nbytes());
  std::vector<std::shared_ptr<Request>> reqs;
  for (int r = 0; r < ctx.size(); ++r)
    if (r != root) reqs.push_back(ctx.transport.isend(r, step_tag(ctx.tag, 0), inputs[r].data(), inputs[r].nbytes()));
  bulk_copy(output.data(), inputs[root].data(), output.nbytes());
  wait_all(ctx, reqs);
}

// Each rank receives its subtree's blocks from its parent (the root packs
// them in relative rank order) and passes each child its share.
void scatter_binomial(CollectiveContext& ctx, const Tensor& output, const std::vector<Tensor>& inputs, int root) {
  TreeBlocks tb(ctx, root, output.nbytes());
  const auto children = tb.tree.children();
  if (children.empty()) return ctx.recv(tb.rank_at(tb.tree.parent()), static_cast<uint32_t>(tb.tree.low), output.data(), tb.block);
  Scratch buf = make_scratch(tb.subtree_bytes());
  abort_on_error(ctx.transport, [&] {
    if (tb.tree.is_root())
      for (int v = 0; v < tb.n; ++v) copy_bytes(buf.get() + v * tb.block, inputs[tb.rank_at(v)].data(), tb.block);
    else
      ctx.recv(tb.rank_at(tb.tree.parent()), static_cast<uint32_t>(tb.tree.low), buf.get(), tb.subtree_bytes());
    std::vector<std::shared_ptr<Request>> reqs;
    for (auto c = children.rbegin(); c != children.rend(); ++c)  // largest subtree first
      reqs.push_back(ctx.transport.isend(tb.rank_at(*c), step_tag(ctx.tag, static_cast<uint32_t>(*c - tb.tree.v)),
                                         buf.get() + tb.offset_of(*c), tb.bytes_of(*c)));
    copy_bytes(output.data(), buf.get(), tb.block);
    wait_all(ctx, reqs);
  });
}

void gather(CollectiveContext& ctx, const std::vector<Tensor>& outputs, const Tensor& input, int root) {
  using Fn = void (*)(CollectiveContext&, const std::vector<Tensor>&, const Tensor&, int);
  static constexpr Algorithm<Fn> kAlgorithms[] = {{"linear", gather_linear}, {"binomial", gather_binomial}};
  static_assert(lists_exactly(kAlgorithms, kGatherAlgorithms));
  Fn run = select_algorithm(ctx, OpCode::Gather, kAlgorithms,
                            [&] { return pick_transport(OpCode::Gather, shape_of(ctx, input.nbytes())); });
  if (ctx.size() == 1) return bulk_copy(outputs[0].data(), input.data(), input.nbytes());
  run(ctx, outputs, input, root);
}

void scatter(CollectiveContext& ctx, const Tensor& output, const std::vector<Tensor>& inputs, int root) {
  using Fn = void (*)(CollectiveContext&, const Tensor&, const std::vector<Tensor>&, int);
  static constexpr Algorithm<Fn> kAlgorithms[] = {{"linear", scatter_linear}, {"binomial", scatter_binomial}};
  static_assert(lists_exactly(kAlgorithms, kScatterAlgorithms));
  Fn run = select_algorithm(ctx, OpCode::Scatter, kAlgorithms,
                            [&] { return pick_transport(OpCode::Scatter, shape_of(ctx, output.nbytes())); });
  if (ctx.size() == 1) return bulk_copy(output.data(), inputs[0].data(), output.nbytes());
  run(ctx, output, inputs, root);
}

}  // namespace tdist::algorithms
