#include "algorithms/pipeline.h"

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "tdist/errors.h"
#include "algorithms/selector.h"
#include "reduce/reduction_kernels.h"
#include "util/settings.h"

namespace tdist {

namespace {

// Receives kept posted ahead (sends are posted as soon as they are ready). Each pending reducing receive holds
// one scratch segment; fewer were slower, more no faster for twice the scratch
// (docs/tuning_log.md: Pipelined algorithms).
constexpr size_t kWindow = 4;
// Tag steps available to one stream (the tag's step field has 24 bits; the
// top values are reserved for fixed steps such as butterfly folds).
constexpr size_t kMaxStreamSteps = size_t{1} << 23;

}  // namespace

size_t segment_bytes(Pipeline kind, bool one_host, int ranks) {
  // Ring: smaller segments cost a wake-up each, larger ones leave the cache;
  // with two ranks on one host a segment is reduced as soon as it arrives,
  // and the next one is on its way, so smaller segments keep the data in
  // cache at no cost. Chain: small segments across hosts keep every link
  // busy; on one host 1 MiB makes each segment go by rendezvous, so a sender
  // cannot run ahead of a root that folds, which otherwise buffers and copies
  // every early segment. The measurements: docs/tuning_log.md, Pipelined
  // algorithms.
  static constexpr size_t kRingSegmentBytes = 4 * 1024 * 1024, kPairRingSegmentBytes = 1024 * 1024,
                          kChainSegmentBytes = 256 * 1024, kHostChainSegmentBytes = 1024 * 1024;
  if (auto v = settings::get<"TDIST_ALGO_SEGMENT_BYTES">()) return static_cast<size_t>(*v);  // at least 1 (the registry)
  if (kind == Pipeline::Ring) return one_host && ranks == 2 ? kPairRingSegmentBytes : kRingSegmentBytes;
  return one_host ? kHostChainSegmentBytes : kChainSegmentBytes;
}

size_t segments_for(size_t max_count, size_t esize, Pipeline kind, bool one_host, int ranks) {
  size_t per = std::max<size_t>(1, segment_bytes(kind, one_host, ranks) / esize);  // elements per segment
  return std::max<size_t>(1, (max_count + per - 1) / per);
}

void run_stream(CollectiveContext& ctx, const SegmentStream& st) {
  const size_t U = st.units;
  if (U > kMaxStreamSteps)
    throw DistBackendError("internal error: a segment stream of " + std::to_string(U) + " units has too many steps");
  const bool reduces = static_cast<bool>(st.local);
  const size_t slot_bytes = st.max_segment_count * st.esize;
  Scratch slots = make_scratch(reduces ? kWindow * slot_bytes : 0);
  std::shared_ptr<Request> recvs[kWindow];
  std::deque<std::shared_ptr<Request>> sends;  // posted, not yet finished, in order (null: nothing to send)
  const char* locals[kWindow] = {};
  // A rank without a sender (or receiver) has all its receives (sends) done.
  size_t r_posted = st.from >= 0 ? 0 : U, r_done = r_posted;
  size_t s_posted = st.to >= 0 ? 0 : U, s_done = s_posted;

  auto post_recv = [&] {
    size_t u = r_posted++, w = u % kWindow;
    Span seg = st.recv(u);
    recvs[w].reset();
    if (seg.count == 0) return;
    locals[w] = reduces ? st.local(u) : nullptr;
    char* dst = locals[w] ? slots.get() + w * slot_bytes : seg.data;
    recvs[w] = ctx.transport.irecv(st.from, step_tag(ctx.tag, st.first_step + static_cast<uint32_t>(u)), dst,
                                   seg.count * st.esize);
  };
  auto finish_recv = [&] {
    size_t u = r_done++, w = u % kWindow;
    if (recvs[w]) {
      ctx.transport.wait(*recvs[w], ctx.deadline);
      if (locals[w]) {
        Span seg = st.recv(u);
        reduction::combine(st.op, st.dtype, seg.data, slots.get() + w * slot_bytes, locals[w], seg.count);
      }
    }
    if (r_posted < U) post_recv();
  };
  auto post_send = [&] {
    size_t u = s_posted++;
    Span seg = st.send(u);
    sends.push_back(seg.count == 0 ? nullptr
                                   : ctx.transport.isend(st.to, step_tag(ctx.tag, st.first_step + static_cast<uint32_t>(u)),
                                                         seg.data, seg.count * st.esize));
  };
  auto finish_send = [&] {
    ++s_done;
    if (sends.front()) ctx.transport.wait(*sends.front(), ctx.deadline);
    sends.pop_front();
  };
  auto send_ready = [&] { return s_posted < U && (s_posted < st.lag || s_posted - st.lag < r_done); };

  abort_on_error(ctx.transport, [&] {
    while (r_posted < std::min(U, kWindow)) post_recv();
    while (r_done < U || s_done < U) {
      while (s_done < s_posted && (!sends.front() || sends.front()->done())) finish_send();
      // Every send is posted as soon as its data is ready, and a rank blocks on
      // a send only once all its receives are done. A send may complete only
      // when the peer has posted its receive (large messages go by rendezvous),
      // and a receive only when the peer has posted its send; waiting for
      // receives first, with every ready send already posted, cannot close a
      // cycle of ranks: the step each rank waits for is ready at its sender.
      while (send_ready()) post_send();
      if (r_done < U)
        finish_recv();
      else if (s_done < s_posted)
        finish_send();
    }
  });
}

void run_ring(CollectiveContext& ctx, const RingPlan& p) {
  const int n = static_cast<int>(p.work.size());
  const int steps = p.end - p.first;
  if (n <= 1 || steps <= 0) return;
  const size_t esize = p.work.esize;
  const bool reduces = p.local && p.first < n - 1;
  // Segments pay off where a segment is reduced while still in cache; a ring
  // that only copies gains nothing from them, so it moves whole blocks
  // (docs/tuning_log.md: Pipelined algorithms).
  size_t S = reduces ? segments_for(p.work.max_count(), esize, Pipeline::Ring, one_host(ctx), n) : 1;
  S = std::min(S, std::max<size_t>(1, kMaxStreamSteps / static_cast<size_t>(steps)));
  auto block = [&](int i) { return ((i % n) + n) % n; };
  // Step g of the ring sends block pos-g-1 and receives block pos-g-2 (mod n),
  // in both phases (see pipeline.h).
  auto segment = [&](const Blocks& b, int blk, size_t k) {
    const Span& s = b.span[blk];
    return Span{s.data + part_begin(s.count, S, k) * esize, part_count(s.count, S, k)};
  };
  SegmentStream st;
  st.from = p.left;
  st.to = p.right;
  st.units = static_cast<size_t>(steps) * S;
  st.lag = S;  // the block received in step g is the one sent in step g+1
  st.first_step = p.first_step;
  st.esize = esize;
  st.send = [&](size_t u) {
    int g = p.first + static_cast<int>(u / S);
    // A reduce-scatter starts from this rank's own contribution.
    const Blocks& from = (g == 0 && p.local) ? *p.local : p.work;
    return segment(from, block(p.pos - g - 1), u % S);
  };
  st.recv = [&](size_t u) { return segment(p.work, block(p.pos - (p.first + static_cast<int>(u / S)) - 2), u % S); };
  if (reduces) {
    st.local = [&](size_t u) -> const char* {
      int g = p.first + static_cast<int>(u / S);
      if (g >= n - 1) return nullptr;  // all-gather: lands in place
      return segment(*p.local, block(p.pos - g - 2), u % S).data;
    };
    st.op = p.op;
    st.dtype = p.dtype;
    st.max_segment_count = (p.work.max_count() + S - 1) / S;
  }
  run_stream(ctx, st);
}

RingPlan rank_ring(CollectiveContext& ctx, Blocks work) {
  const int n = ctx.size(), r = ctx.rank();
  RingPlan p;
  p.pos = r;
  p.left = (r - 1 + n) % n;
  p.right = (r + 1) % n;
  p.work = std::move(work);
  return p;
}

}  // namespace tdist
