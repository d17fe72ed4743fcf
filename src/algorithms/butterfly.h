// The butterfly shared by recursive doubling, recursive halving and
// Rabenseifner's algorithms. They run on the largest power of two pof2 <= n
// ranks; the other rem = n - pof2 ranks fold first: for i < rem, rank 2i
// hands its data to rank 2i+1 (which then stands for both as participant i)
// and receives its result from it at the end. Ranks 2rem.. take part as
// participant rank - rem. Participants are numbered in rank order, so a range
// of participants stands for a contiguous range of ranks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "tdist/reduce_op.h"
#include "algorithms/collective.h"

namespace tdist {

// out = in (op) out or out (op) in: every rank evaluates op(lower rank's
// data, higher rank's data), so results are bitwise identical on every rank
// even where operand order matters (NaN payloads, signed zeros).
void reduce_ordered(ReduceOp op, DType dtype, void* acc, const void* in, size_t count, bool in_is_lower);

class Butterfly {
 public:
  // Bound(i), i in [0, pof2]: first element of participant i's part of the
  // buffer (Bound(pof2) = the whole count); non-decreasing.
  using Bound = std::function<size_t(int)>;

  Butterfly(CollectiveContext& ctx, ReduceOp op, DType dtype);

  int pof2() const { return pof2_; }
  // This rank's participant number, -1 when it folds out (an even rank < 2rem).
  int participant() const { return participant_; }
  // The rank taking part as participant i, and the first rank it stands for.
  int rank_of(int i) const { return i < rem_ ? 2 * i + 1 : i + rem_; }
  int first_rank_of(int i) const { return i < rem_ ? 2 * i : i + rem_; }
  // The participant standing for rank r.
  int participant_of(int r) const { return r < 2 * rem_ ? r / 2 : r - rem_; }
  // Whether this rank is one of a folded pair (rank < 2rem).
  bool folds() const { return ctx_.rank() < 2 * rem_; }

  // Folded pairs: the even rank sends `count` elements at buf; the odd rank
  // reduces them into its buf (the even rank's data as the lower operand).
  // tmp holds count elements. No-op for the other ranks.
  void fold_in(void* buf, size_t count, void* tmp);
  // The reverse hand-over between rank 2i+1 (sends `send`) and rank 2i
  // (receives into `recv`), `bytes` each.
  void fold_out(const void* send, void* recv, size_t bytes);

  // Participants only. Recursive doubling: every round exchanges the whole
  // buffer with the partner and reduces (log2(pof2) rounds).
  void all_reduce_doubling(void* buf, size_t count, void* tmp);
  // Recursive halving: every round sends half of the part still held and
  // reduces the other half; after it participant i holds the reduction of
  // elements [bound(i), bound(i+1)). tmp is as large as buf.
  void reduce_scatter_halving(void* buf, const Bound& bound, void* tmp);
  // Recursive doubling of parts: participant i's part [bound(i), bound(i+1))
  // spreads until every participant holds the whole buffer.
  void all_gather_doubling(void* buf, const Bound& bound);
  // Participant parts collected on participant `root` along a binomial tree
  // (the butterfly's rounds, one direction only).
  void gather_parts(void* buf, const Bound& bound, int root);

 private:
  uint32_t next_step() { return step_++; }
  char* at(void* buf, size_t element) const { return static_cast<char*>(buf) + element * esize_; }

  CollectiveContext& ctx_;
  ReduceOp op_;
  DType dtype_;
  size_t esize_;
  int pof2_ = 1, rem_ = 0, participant_ = -1;
  uint32_t step_ = 1;  // step 0 is fold_in's, the last step value fold_out's
};

}  // namespace tdist
