// all_to_all: pairwise exchange; linear (everything posted at once); Bruck
// for small equal blocks.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "tdist/errors.h"
#include "algorithms/blocks.h"
#include "algorithms/collective.h"
#include "algorithms/selector.h"
#include "util/bulk_copy.h"

namespace tdist::algorithms {

// Pairwise exchange: in step s a rank sends to rank+s and receives from
// rank-s, so every link carries one block per step and no rank is hot.
// Blocks may differ in size.
void all_to_all_pairwise(CollectiveContext& ctx, const std::vector<Tensor>& outputs,
                         const std::vector<Tensor>& inputs) {
  const int n = ctx.size(), rank = ctx.rank();
  bulk_copy(outputs[rank].data(), inputs[rank].data(), outputs[rank].nbytes());
  for (int s = 1; s < n; ++s) {
    int to = (rank + s) % n, from = (rank - s + n) % n;
    ctx.send_recv(to, inputs[to].data(), inputs[to].nbytes(), from, outputs[from].data(), outputs[from].nbytes(),
                  static_cast<uint32_t>(s));
  }
}

// Linear: every receive, then every send, posted at once, then all waited
// for: the exchange takes one message's latency where pairwise takes n-1 in a
// row (a rank that is late, or waits for a core, holds up only the messages to
// and from it). Sends go out in pairwise order, so no rank is everyone's first
// target. Blocks may differ in size.
void all_to_all_linear(CollectiveContext& ctx, const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs) {
  const int n = ctx.size(), rank = ctx.rank();
  const uint64_t tag = step_tag(ctx.tag, 0);  // one message per pair of ranks
  std::vector<std::shared_ptr<Request>> requests;
  requests.reserve(2 * static_cast<size_t>(n - 1));
  abort_on_error(ctx.transport, [&] {
    for (int s = 1; s < n; ++s) {
      const int from = (rank - s + n) % n;
      requests.push_back(ctx.transport.irecv(from, tag, outputs[from].data(), outputs[from].nbytes()));
    }
    for (int s = 1; s < n; ++s) {
      const int to = (rank + s) % n;
      requests.push_back(ctx.transport.isend(to, tag, inputs[to].data(), inputs[to].nbytes()));
    }
    bulk_copy(outputs[rank].data(), inputs[rank].data(), outputs[rank].nbytes());
    for (const auto& r : requests) ctx.transport.wait(*r, ctx.deadline);
  });
}

// Bruck: ceil(log2 n) rounds instead of n-1. Blocks sit in slots rotated by
// the rank (slot i: the block for rank + i); round d sends every slot with
// bit d set to rank + d and takes the same slots from rank - d; at the end
// slot i holds the block from rank - i. Each block travels up to log2(n)
// times: only for small blocks, and only blocks of one size on every rank
// (each rank can check only its own).
void all_to_all_bruck(CollectiveContext& ctx, const std::vector<Tensor>& outputs,
                      const std::vector<Tensor>& inputs) {
  const int n = ctx.size(), r = ctx.rank();
  const size_t block = inputs[0].nbytes();
  for (int i = 0; i < n; ++i)
    if (inputs[i].nbytes() != block || outputs[i].nbytes() != block)
      throw DistValueError("all_to_all: the bruck algorithm needs blocks of one size; this rank's differ (" +
                           std::to_string(inputs[i].nbytes()) + " and " + std::to_string(outputs[i].nbytes()) +
                           " bytes to and from rank " + std::to_string(i) + ", " + std::to_string(block) +
                           " to rank 0): use pairwise");
  Scratch slots = make_scratch(block * n), packed = make_scratch(block * n), incoming = make_scratch(block * n);
  for (int i = 0; i < n; ++i) copy_bytes(slots.get() + block * i, inputs[(r + i) % n].data(), block);
  abort_on_error(ctx.transport, [&] {
    uint32_t step = 0;
    for (int d = 1; d < n; d <<= 1, ++step) {
      size_t k = 0;
      for (int i = d; i < n; ++i)
        if (i & d) copy_bytes(packed.get() + block * k++, slots.get() + block * i, block);
      ctx.send_recv((r + d) % n, packed.get(), block * k, (r - d + n) % n, incoming.get(), block * k, step);
      k = 0;
      for (int i = d; i < n; ++i)
        if (i & d) copy_bytes(slots.get() + block * i, incoming.get() + block * k++, block);
    }
  });
  for (int i = 0; i < n; ++i) copy_bytes(outputs[(r - i + n) % n].data(), slots.get() + block * i, block);
}

void all_to_all(CollectiveContext& ctx, const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                bool uniform) {
  using Fn = void (*)(CollectiveContext&, const std::vector<Tensor>&, const std::vector<Tensor>&);
  static constexpr Algorithm<Fn> kAlgorithms[] = {
      {"pairwise", all_to_all_pairwise}, {"bruck", all_to_all_bruck}, {"linear", all_to_all_linear}};
  static_assert(lists_exactly(kAlgorithms, kAllToAllAlgorithms));
  Fn run = select_algorithm(ctx, OpCode::AllToAll, kAlgorithms, [&] {
    Shape s = shape_of(ctx, inputs[0].nbytes());
    s.equal_blocks = uniform;
    return pick_transport(OpCode::AllToAll, s);
  });
  run(ctx, outputs, inputs);
}

}  // namespace tdist::algorithms
