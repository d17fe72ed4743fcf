// The reducing collectives in the host segment: all_reduce, reduce, reduce_scatter.
#include <algorithm>
#include <cstring>
#include <optional>

#include "shm_engine/chunking.h"
#include "shm_engine/collectives.h"
#include "reduce/reduction_kernels.h"

namespace tdist::shm_engine {

namespace {

// Folding works through blocks this big so that the partial result stays in
// L1 while the n inputs stream past it.
constexpr size_t kFoldBlockBytes = 8 << 10;

// Up to this many bytes an all_reduce or reduce takes one round in which
// every rank (the root, for reduce) folds everything; above it the ranks
// share the folding and need one more round, which pays from about 16 KiB
// (docs/tuning_log.md: Shared-memory engine).
size_t one_round_limit(const HostSegment& a) { return std::min(a.one_round_bytes(), a.slot_bytes()); }

// out[i] = src(0)[i] op src(1)[i] op ... op src(n-1)[i] for i < count, folded
// left in rank order (bitwise the same result on every rank), then finalized
// (AVG, PREMUL_SUM). src(q) is rank q's first element; out may be src(0), or
// src(1) when n is 2 (each combine's output is then exactly one of its
// inputs, as reduction::combine allows), and none of the others.
template <typename Src>
void fold(ReduceOp op, DType dtype, char* out, const Src& src, int n, size_t count) {
  const size_t es = dtype_size(dtype);
  const size_t block = std::max<size_t>(1, kFoldBlockBytes / es);
  const bool finalize = reduction::needs_finalize(op);
  for (size_t at = 0; at < count; at += block) {
    const size_t c = std::min(block, count - at);
    const size_t off = at * es;
    reduction::combine(op, dtype, out + off, src(0) + off, src(1) + off, c);
    for (int q = 2; q < n; ++q) reduction::combine(op, dtype, out + off, out + off, src(q) + off, c);
    if (finalize) reduction::finalize(op, dtype, out + off, c, n);
  }
}

// A tensor in chunks of a slot: element size, elements, elements per chunk, chunks.
struct Chunks {
  size_t es, count, chunk, chunks;
};
Chunks chunks_of(const HostSegment& a, const Tensor& t) {
  const size_t es = t.element_size(), count = static_cast<size_t>(t.numel()), chunk = a.slot_bytes() / es;
  return {es, count, chunk, ceil_div(count, chunk)};
}

// Small data, one round: every rank copies its tensor into its slot; then
// every rank that wants the result (all, or only `dest`) folds all slots.
void fold_everything(HostSegment& a, CollectiveContext& ctx, Signature sig, const Tensor& t, ReduceOp op, int dest) {
  const uint32_t r = a.next_round(ctx);
  copy(a.slot(r, a.rank()), t.data(), t.nbytes());
  if (dest >= 0 && dest != a.rank()) {
    a.start_and_leave(ctx, sig);  // its data is in its slot: nothing to wait for
    return;
  }
  a.start(ctx, sig);
  fold(op, t.dtype(), static_cast<char*>(t.data()), [&](int q) { return a.slot(r, q); }, a.size(),
       static_cast<size_t>(t.numel()));
}

// Large data, in chunks of a slot: the ranks fold one share each of a chunk
// (a reduce-scatter inside the segment) into the round's result area, and copy
// the whole result out after the next sync. Round j copies chunk j in, then
// copies chunk j-1's result out and folds its share of chunk j: chunks + 1
// rounds of one sync each, and a rank copies chunk j+1 in while slower ranks
// still fold chunk j. A rank's own share of its own data is read by nobody
// else, so it stays out of the slot and is folded straight from the tensor.
// `started`: a round of this operation has run already (fold_two_chosen's).
void fold_in_shares(HostSegment& a, CollectiveContext& ctx, Signature sig, const Tensor& t, ReduceOp op, int dest,
                    bool started = false) {
  const int me = a.rank();
  const auto [es, count, chunk, chunks] = chunks_of(a, t);
  const size_t unit = std::max<size_t>(1, 64 / es);  // shares of whole cache lines
  const bool wants_result = dest < 0 || dest == me;
  // One piece to one reader (reduce) streams (chunking.h: publish), unless
  // ranks share cores: then the root reads some pieces from its own core's
  // cache. For all_reduce it did not pay (docs/tuning_log.md).
  const bool stream = dest >= 0 && !a.oversubscribed() && chunks == 1 && streams(count * es);
  char* data = static_cast<char*>(t.data());
  for (size_t j = 0; j <= chunks; ++j) {
    const uint32_t r = a.next_round(ctx);
    const size_t len = j < chunks ? std::min(chunk, count - j * chunk) : 0;
    const Share s = share_of(len, unit, a.size(), me);
    const size_t off = s.begin * es;
    char* in = len > 0 ? data + j * chunk * es : nullptr;
    if (len > 0) {
      publish(a.slot(r, me), in, off, stream);
      publish(a.slot(r, me) + s.end * es, in + s.end * es, (len - s.end) * es, stream);
    }
    a.enter(ctx, j, sig, /*leave=*/false, started);
    if (j > 0 && wants_result)
      copy(data + (j - 1) * chunk * es, a.result(r - 1), std::min(chunk, count - (j - 1) * chunk) * es);
    if (s.end == s.begin) continue;
    fold(op, t.dtype(), a.result(r) + off, [&](int q) { return q == me ? in + off : a.slot(r, q) + off; },
         a.size(), s.end - s.begin);
  }
}

// 2 ranks with a core each, in chunks of a slot. A rank whose data the other
// needs (a reduce's other rank; both in an all_reduce) streams chunk j into
// its slot; a rank that wants the result (the root; both) folds the other's
// chunk into its own tensor in place. Shared folding (fold_in_shares) has
// each rank fold half and copy the other's half from that rank's cache,
// which costs 5-10x more where the two cores share no cache; here a rank
// reads only what the other streamed to memory, and copies nothing of its
// own. With more ranks the folding would no longer be shared; an all_reduce
// above a slot waits on memory where the cores share a cache (1.2-1.5x slower
// there), so it comes here only when fold_two_chosen finds it faster.
// docs/tuning_log.md: "A reduce of 2 ranks folded by its root".
void fold_two_in_place(HostSegment& a, CollectiveContext& ctx, Signature sig, const Tensor& t, ReduceOp op, int dest,
                       bool started = false) {
  const int me = a.rank();
  const auto [es, count, chunk, chunks] = chunks_of(a, t);
  char* data = static_cast<char*>(t.data());
  for (size_t j = 0; j < chunks; ++j) {
    const uint32_t r = a.next_round(ctx);
    const size_t len = std::min(chunk, count - j * chunk);
    char* in = data + j * chunk * es;
    if (me != dest) publish(a.slot(r, me), in, len * es, /*stream=*/true);
    if (dest >= 0 && me != dest) {  // nothing to read: it leaves the last round
      a.enter(ctx, j, sig, /*leave=*/j + 1 == chunks);
      continue;
    }
    a.enter(ctx, j, sig, /*leave=*/false, started);
    fold(op, t.dtype(), in, [&](int q) { return q == me ? in : a.slot(r, q); }, a.size(), len);
  }
}

// An all_reduce above a slot on 2 ranks with a core each: in shares or in
// place, as rank 0 picks (HostSegment::two_rank_all_reduce: by timing both
// ways here, or as its setting says). A first round of its own carries the
// pick, so both ranks run the same way whatever their own settings, and each
// rank's time of the last call. The round costs one sync, under 1% of a
// slot's all_reduce.
void fold_two_chosen(HostSegment& a, CollectiveContext& ctx, Signature sig, const Tensor& t, ReduceOp op) {
  constexpr int kInPlace = 1;
  const uint32_t r = a.next_round(ctx);
  a.propose(r, a.two_rank_all_reduce(), t.nbytes());
  a.start(ctx, sig);
  const RankZeroChoice::Picked way = a.picked(r, a.two_rank_all_reduce());
  std::optional<TimedWay> timed;
  if (way.timed) timed.emplace(a.two_rank_all_reduce());
  if (way.way == kInPlace)
    fold_two_in_place(a, ctx, sig, t, op, -1, /*started=*/true);
  else
    fold_in_shares(a, ctx, sig, t, op, -1, /*started=*/true);
}

// At most a word (HostSegment::kWordBytes), one round: every rank publishes its data
// in its RankLine with its arrival, and the ranks that want the result fold
// copies of the others' words. A waiter takes one cache miss per rank instead
// of two (the line, then the slot; docs/tuning_log.md: Shared-memory engine).
constexpr int kMaxWordRanks = 64;  // the words are copied to the stack

void fold_words(HostSegment& a, CollectiveContext& ctx, Signature sig, const Tensor& t, ReduceOp op, int dest) {
  if (dest >= 0 && dest != a.rank()) {
    // A reduce's contributor: a post round (HostSegment: Posts), left at once.
    a.next_post_round(ctx);
    a.post_and_leave(ctx, sig, t.data(), t.nbytes(), /*awaited=*/false);
    return;
  }
  const uint32_t r = a.next_round(ctx);
  a.put_word(r, t.data(), t.nbytes());
  a.start(ctx, sig);
  uint64_t words[kMaxWordRanks];
  for (int q = 0; q < a.size(); ++q) words[q] = a.word(r, q);
  fold(op, t.dtype(), static_cast<char*>(t.data()), [&](int q) { return reinterpret_cast<const char*>(&words[q]); },
       a.size(), static_cast<size_t>(t.numel()));
}

// A reduce whose data a post carries (HostSegment::posts_carry), one post
// round: the contributors post their data and leave, the root waits for them
// and folds their payloads with a copy of its own tensor (fold's output may
// not be one of its inputs but the first).
void fold_posts(HostSegment& a, CollectiveContext& ctx, Signature sig, const Tensor& t, ReduceOp op, int dest) {
  if (dest != a.rank()) {
    a.next_post_round(ctx);
    a.post_and_leave(ctx, sig, t.data(), t.nbytes(), /*awaited=*/false);
    return;
  }
  const uint32_t r = a.next_round(ctx);
  a.start(ctx, sig);
  alignas(64) char own[HostSegment::kPostBytes];
  if (t.nbytes() == 0) return;
  std::memcpy(own, t.data(), t.nbytes());
  fold(op, t.dtype(), static_cast<char*>(t.data()), [&](int q) { return q == dest ? own : a.post_data(r, q); },
       a.size(), static_cast<size_t>(t.numel()));
}

void reduce_to(HostSegment& a, CollectiveContext& ctx, Signature sig, const Tensor& t, ReduceOp op, int dest) {
  if (t.nbytes() <= HostSegment::kWordBytes && a.size() <= kMaxWordRanks)
    fold_words(a, ctx, sig, t, op, dest);
  else if (dest >= 0 && a.posts_carry(t.nbytes()))
    fold_posts(a, ctx, sig, t, op, dest);
  else if (t.nbytes() <= one_round_limit(a))
    fold_everything(a, ctx, sig, t, op, dest);
  else if (a.size() == 2 && !a.oversubscribed() && (dest >= 0 || t.nbytes() <= a.slot_bytes()))
    fold_two_in_place(a, ctx, sig, t, op, dest);
  else if (a.size() == 2 && !a.oversubscribed())
    fold_two_chosen(a, ctx, sig, t, op);
  else
    fold_in_shares(a, ctx, sig, t, op, dest);
}

bool overlap(const Tensor& x, const Tensor& y) {
  auto* a = static_cast<const char*>(x.data());
  auto* b = static_cast<const char*>(y.data());
  return x.nbytes() > 0 && y.nbytes() > 0 && a < b + y.nbytes() && b < a + x.nbytes();
}

}  // namespace

void all_reduce(HostSegment& a, CollectiveContext& ctx, const Tensor& t, ReduceOp op) {
  reduce_to(a, ctx, signature(OpCode::AllReduce, static_cast<int>(t.dtype()), op.kind(), -1, t.nbytes()), t, op, -1);
}

void reduce(HostSegment& a, CollectiveContext& ctx, const Tensor& t, int root, ReduceOp op) {
  reduce_to(a, ctx, signature(OpCode::Reduce, static_cast<int>(t.dtype()), op.kind(), root, t.nbytes()), t, op,
            root);
}

// Each rank's slot holds one part per destination rank; in round j rank i
// writes piece j of inputs[d] into its part d, and rank d folds part d of
// every slot into piece j of its output. One sync per round.
void reduce_scatter(HostSegment& a, CollectiveContext& ctx, const Tensor& output, const std::vector<Tensor>& inputs,
                    ReduceOp op) {
  const int n = a.size(), me = a.rank();
  const size_t part = part_bytes(a.slot_bytes(), n);
  const size_t es = output.element_size();
  size_t total = 0, rounds = 1;
  for (const auto& in : inputs) {
    total += in.nbytes();
    rounds = std::max(rounds, rounds_for(in.nbytes(), part));
  }
  // Part `me` is read by this rank only: fold it straight from the input,
  // unless writing the output would overwrite it first.
  const bool direct = !overlap(output, inputs[me]);
  const char* own = static_cast<const char*>(inputs[me].data());
  char* out = static_cast<char*>(output.data());
  const Signature sig = signature(OpCode::ReduceScatter, static_cast<int>(output.dtype()), op.kind(), -1, total);
  for (size_t j = 0; j < rounds; ++j) {
    const uint32_t r = a.next_round(ctx);
    const size_t at = j * part;
    for (int d = 0; d < n; ++d)
      if (size_t len = piece_len(inputs[d].nbytes(), at, part); (d != me || !direct) && len > 0)
        copy(a.slot(r, me) + d * part, static_cast<const char*>(inputs[d].data()) + at, len);
    a.enter(ctx, j, sig);
    const size_t len = piece_len(output.nbytes(), at, part);
    if (len == 0) continue;
    fold(op, output.dtype(), out + at,
         [&](int q) { return q == me && direct ? own + at : a.slot(r, q) + me * part; }, n, len / es);
  }
}

}  // namespace tdist::shm_engine
