#include "algorithms/butterfly.h"

#include "reduce/reduction_kernels.h"

namespace tdist {

namespace {
// fold_out's step: the last one, whatever the number of rounds before it.
constexpr uint32_t kFoldOutStep = 0xffffff;
}  // namespace

void reduce_ordered(ReduceOp op, DType dtype, void* acc, const void* in, size_t count, bool in_is_lower) {
  if (in_is_lower)
    reduction::combine(op, dtype, acc, in, acc, count);
  else
    reduction::combine(op, dtype, acc, acc, in, count);
}

Butterfly::Butterfly(CollectiveContext& ctx, ReduceOp op, DType dtype)
    : ctx_(ctx), op_(op), dtype_(dtype), esize_(dtype_size(dtype)) {
  const int n = ctx.size(), r = ctx.rank();
  while (pof2_ * 2 <= n) pof2_ *= 2;
  rem_ = n - pof2_;
  participant_ = (r < 2 * rem_ && r % 2 == 0) ? -1 : participant_of(r);
}

void Butterfly::fold_in(void* buf, size_t count, void* tmp) {
  const int r = ctx_.rank();
  if (!folds()) return;
  if (r % 2 == 0) {
    ctx_.send(r + 1, 0, buf, count * esize_);
  } else {
    ctx_.recv(r - 1, 0, tmp, count * esize_);
    reduce_ordered(op_, dtype_, buf, tmp, count, /*in_is_lower=*/true);
  }
}

void Butterfly::fold_out(const void* send, void* recv, size_t bytes) {
  const int r = ctx_.rank();
  if (!folds()) return;
  if (r % 2 == 1)
    ctx_.send(r - 1, kFoldOutStep, send, bytes);
  else
    ctx_.recv(r + 1, kFoldOutStep, recv, bytes);
}

void Butterfly::all_reduce_doubling(void* buf, size_t count, void* tmp) {
  for (int mask = 1; mask < pof2_; mask <<= 1) {
    int peer = rank_of(participant_ ^ mask);
    ctx_.send_recv(peer, buf, count * esize_, peer, tmp, count * esize_, next_step());
    reduce_ordered(op_, dtype_, buf, tmp, count, peer < ctx_.rank());
  }
}

void Butterfly::reduce_scatter_halving(void* buf, const Bound& bound, void* tmp) {
  // Largest distance first: with the halves taken in participant order,
  // participant i ends up holding part i.
  for (int mask = pof2_ / 2; mask > 0; mask >>= 1) {
    const int lo = participant_ & ~(2 * mask - 1), mid = lo + mask, hi = lo + 2 * mask;
    const bool upper = participant_ & mask;
    const size_t keep_b = bound(upper ? mid : lo), keep_e = bound(upper ? hi : mid);
    const size_t give_b = bound(upper ? lo : mid), give_e = bound(upper ? mid : hi);
    int peer = rank_of(participant_ ^ mask);
    ctx_.send_recv(peer, at(buf, give_b), (give_e - give_b) * esize_, peer, tmp, (keep_e - keep_b) * esize_,
                   next_step());
    reduce_ordered(op_, dtype_, at(buf, keep_b), tmp, keep_e - keep_b, peer < ctx_.rank());
  }
}

void Butterfly::all_gather_doubling(void* buf, const Bound& bound) {
  for (int mask = 1; mask < pof2_; mask <<= 1) {
    const int mine = participant_ & ~(mask - 1), theirs = mine ^ mask;
    int peer = rank_of(participant_ ^ mask);
    ctx_.send_recv(peer, at(buf, bound(mine)), (bound(mine + mask) - bound(mine)) * esize_, peer,
                   at(buf, bound(theirs)), (bound(theirs + mask) - bound(theirs)) * esize_, next_step());
  }
}

void Butterfly::gather_parts(void* buf, const Bound& bound, int root) {
  for (int mask = 1; mask < pof2_; mask <<= 1) {
    // Before this round a participant holds the aligned range of `mask` parts
    // around it; the one on root's side of bit `mask` takes its partner's.
    const int mine = participant_ & ~(mask - 1), theirs = mine ^ mask;
    int peer = rank_of(participant_ ^ mask);
    uint32_t step = next_step();
    if ((participant_ ^ root) & mask) {
      ctx_.send(peer, step, at(buf, bound(mine)), (bound(mine + mask) - bound(mine)) * esize_);
      return;
    }
    ctx_.recv(peer, step, at(buf, bound(theirs)), (bound(theirs + mask) - bound(theirs)) * esize_);
  }
}

}  // namespace tdist
