#include "backends/device_path/ipc_collectives.h"

#include <algorithm>

#include "algorithms/tags.h"
#include "tdist/errors.h"
#include "util/settings.h"

namespace tdist::ipc {

namespace {

size_t chunks_of(size_t count, size_t per_chunk) { return (count + per_chunk - 1) / per_chunk; }

size_t per_chunk(size_t element, int blocks) {
  return std::max<size_t>(1, IpcExchange::kHalfBytes / (element * static_cast<size_t>(blocks)));
}

bool uniform(const std::vector<Tensor>& list, const Tensor& like) {
  for (const Tensor& t : list)
    if (t.numel() != like.numel()) return false;
  return true;
}

char* at(const Tensor& t, size_t element_offset) {
  return static_cast<char*>(t.data()) + element_offset * t.element_size();
}

// Rank r's slice of `count` elements split among n: [first, first + size).
void slice(size_t count, int n, int r, size_t& first, size_t& size) {
  const size_t base = count / n, extra = count % n;
  first = r * base + std::min<size_t>(r, extra);
  size = base + (static_cast<size_t>(r) < extra ? 1 : 0);
}

// out = op over ins (n of them, in place allowed when out is one of them):
// combine() takes at most 16, so larger groups fold in steps.
void combine_all(device::Runtime& rt, ReduceOp op, DType dtype, void* out, std::vector<const void*> ins,
                 size_t count, device::StreamHandle stream) {
  constexpr int kMost = 16;
  size_t next = std::min<size_t>(ins.size(), kMost);
  rt.combine(op, dtype, out, ins.data(), static_cast<int>(next), count, stream);
  while (next < ins.size()) {
    std::vector<const void*> step{out};
    while (next < ins.size() && step.size() < static_cast<size_t>(kMost)) step.push_back(ins[next++]);
    rt.combine(op, dtype, out, step.data(), static_cast<int>(step.size()), count, stream);
  }
}

// AVG and PREMUL_SUM finish after the sum; the sum itself is SUM's.
ReduceOp combining_op(ReduceOp op) {
  return op.kind() == ReduceOp::AVG || op.kind() == ReduceOp::PREMUL_SUM ? ReduceOp(ReduceOp::SUM) : op;
}

}  // namespace

PathChoice path_setting() {
  // The registry checked the value and spells it as its choices do.
  const std::string_view value = settings::get<"TDIST_CUDA_PATH">();
  if (value == "STAGED") return PathChoice::Staged;
  return value == "IPC" ? PathChoice::Ipc : PathChoice::Auto;
}

Plan plan(int, const EngineCall&, const Tensor& t, const ReduceOp&) {
  const size_t chunks = chunks_of(static_cast<size_t>(t.numel()), per_chunk(t.element_size(), 1));
  return {true, t.nbytes(), static_cast<int>(2 * chunks)};
}

Plan plan(int, const EngineCall&, const Tensor& t, const int&) {
  const size_t chunks = chunks_of(static_cast<size_t>(t.numel()), per_chunk(t.element_size(), 1));
  return {true, t.nbytes(), static_cast<int>(chunks)};
}

Plan plan(int, const EngineCall&, const std::vector<Tensor>& outs, const Tensor& in) {
  // Blocks of different sizes (torch allows them) are staged: every rank sees
  // the same list sizes, so every rank decides alike.
  if (!uniform(outs, in)) return {};
  const size_t chunks = chunks_of(static_cast<size_t>(in.numel()), per_chunk(in.element_size(), 1));
  return {true, in.nbytes(), static_cast<int>(chunks)};
}

Plan plan(int n, const EngineCall&, const Tensor& out, const std::vector<Tensor>& ins, const ReduceOp&) {
  if (!uniform(ins, out)) return {};
  const size_t chunks = chunks_of(static_cast<size_t>(out.numel()), per_chunk(out.element_size(), n));
  return {true, out.nbytes(), static_cast<int>(chunks)};
}

void Call::barrier() {
  const uint64_t first = sequence_of(ctx.tag);
  CollectiveContext step{ctx.transport,
                         collective_tag(OpCode::Barrier, first + 1 + static_cast<uint64_t>(barriers_done),
                                        signature_of(ctx.tag)),
                         ctx.deadline, ctx.forced, ctx.placement};
  ++barriers_done;
  barrier_engine.barrier(step);
}

void Call::wait_for_copies() {
  rt.record(streams.in_ready[0], streams.in);
  rt.synchronize(streams.in_ready[0]);
}

void run(Call& c, const EngineCall&, const Tensor& t, const ReduceOp& op) {
  const int n = c.ctx.size(), me = c.ctx.rank();
  const size_t element = t.element_size(), count = static_cast<size_t>(t.numel());
  const size_t per = per_chunk(element, 1);
  for (size_t off = 0; off < count; off += per) {
    const size_t len = std::min(per, count - off);
    const int h = c.exchange.next_half();
    c.rt.copy(c.exchange.half(me, h), at(t, off), len * element, c.streams.in);
    c.wait_for_copies();
    c.barrier();  // every rank's chunk is in its buffer
    size_t first = 0, size = 0;
    slice(len, n, me, first, size);
    if (size != 0) {
      std::vector<const void*> ins;
      for (int r = 0; r < n; ++r) ins.push_back(c.exchange.half(r, h) + first * element);
      // Into this rank's own buffer: slice `me` of it is read by this rank only.
      char* reduced = c.exchange.half(me, h) + first * element;
      combine_all(c.rt, combining_op(op), t.dtype(), reduced, ins, size, c.streams.in);
      c.rt.finalize(op, t.dtype(), reduced, size, n, c.streams.in);
    }
    c.wait_for_copies();
    c.barrier();  // every slice is reduced
    for (int r = 0; r < n; ++r) {
      slice(len, n, r, first, size);
      if (size != 0)
        c.rt.copy(at(t, off + first), c.exchange.half(r, h) + first * element, size * element, c.streams.in);
    }
    c.wait_for_copies();
  }
}

void run(Call& c, const EngineCall&, const Tensor& t, const int& root) {
  const int me = c.ctx.rank();
  const size_t element = t.element_size(), count = static_cast<size_t>(t.numel());
  const size_t per = per_chunk(element, 1);
  for (size_t off = 0; off < count; off += per) {
    const size_t len = std::min(per, count - off);
    const int h = c.exchange.next_half();
    if (me == root) {
      c.rt.copy(c.exchange.half(me, h), at(t, off), len * element, c.streams.in);
      c.wait_for_copies();
    }
    c.barrier();
    if (me != root) {
      c.rt.copy(at(t, off), c.exchange.half(root, h), len * element, c.streams.in);
      c.wait_for_copies();
    }
  }
}

void run(Call& c, const EngineCall&, const std::vector<Tensor>& outs, const Tensor& in) {
  const int n = c.ctx.size(), me = c.ctx.rank();
  const size_t element = in.element_size(), count = static_cast<size_t>(in.numel());
  const size_t per = per_chunk(element, 1);
  for (size_t off = 0; off < count; off += per) {
    const size_t len = std::min(per, count - off);
    const int h = c.exchange.next_half();
    c.rt.copy(c.exchange.half(me, h), at(in, off), len * element, c.streams.in);
    c.wait_for_copies();
    c.barrier();
    for (int r = 0; r < n; ++r) c.rt.copy(at(outs[r], off), c.exchange.half(r, h), len * element, c.streams.in);
    c.wait_for_copies();
  }
}

void run(Call& c, const EngineCall&, const Tensor& out, const std::vector<Tensor>& ins, const ReduceOp& op) {
  const int n = c.ctx.size(), me = c.ctx.rank();
  const size_t element = out.element_size(), count = static_cast<size_t>(out.numel());
  const size_t per = per_chunk(element, n);
  for (size_t off = 0; off < count; off += per) {
    const size_t len = std::min(per, count - off);
    const int h = c.exchange.next_half();
    // Block d of this chunk at d * len in the half.
    for (int d = 0; d < n; ++d)
      c.rt.copy(c.exchange.half(me, h) + d * len * element, at(ins[d], off), len * element, c.streams.in);
    c.wait_for_copies();
    c.barrier();
    std::vector<const void*> blocks;
    for (int r = 0; r < n; ++r) blocks.push_back(c.exchange.half(r, h) + me * len * element);
    combine_all(c.rt, combining_op(op), out.dtype(), at(out, off), blocks, len, c.streams.in);
    c.rt.finalize(op, out.dtype(), at(out, off), len, n, c.streams.in);
    c.wait_for_copies();
  }
}

}  // namespace tdist::ipc
