#include <algorithm>
#include <vector>

#include "tdist/errors.h"
#include "algorithms/collective.h"
#include "reduce/reduce.h"

namespace tdist {

namespace {

// Accumulate `in` into `acc` so that every rank evaluates op(lower rank's
// data, higher rank's data): bitwise-identical results on all ranks even for
// ops whose result depends on operand order (NaN payloads, signed zeros).
void reduce_ordered(ReduceOp op, DType dtype, void* acc, const void* in, size_t count, bool in_is_lower) {
  if (in_is_lower)
    reduction::combine(op, dtype, acc, in, acc, count);
  else
    reduction::combine(op, dtype, acc, acc, in, count);
}

}  // namespace

// Recursive doubling with the non-power-of-two fold: ranks beyond the largest
// power of two hand their data to a partner first and get the result last.
// log2(n) rounds, each exchanging the whole buffer: best for small messages.
void all_reduce_recursive_doubling(CollectiveContext& ctx, const Tensor& t, ReduceOp op) {
  const int n = ctx.size();
  const int rank = ctx.rank();
  const size_t bytes = t.nbytes();
  const size_t count = static_cast<size_t>(t.numel());
  std::vector<char> tmp(bytes);
  int pof2 = 1;
  while (pof2 * 2 <= n) pof2 *= 2;
  const int rem = n - pof2;
  uint32_t step = 0;

  int newrank;
  if (rank < 2 * rem) {
    if (rank % 2 == 0) {
      ctx.send(rank + 1, step, t.data(), bytes);
      newrank = -1;
    } else {
      ctx.recv(rank - 1, step, tmp.data(), bytes);
      reduce_ordered(op, t.dtype(), t.data(), tmp.data(), count, /*in_is_lower=*/true);
      newrank = rank / 2;
    }
  } else {
    newrank = rank - rem;
  }
  ++step;

  if (newrank >= 0) {
    for (int mask = 1; mask < pof2; mask <<= 1, ++step) {
      int newpeer = newrank ^ mask;
      int peer = newpeer < rem ? newpeer * 2 + 1 : newpeer + rem;
      ctx.send_recv(peer, t.data(), bytes, peer, tmp.data(), bytes, step);
      reduce_ordered(op, t.dtype(), t.data(), tmp.data(), count, peer < rank);
    }
  } else {
    step += static_cast<uint32_t>(__builtin_ctz(static_cast<unsigned>(pof2)));
  }

  if (rank < 2 * rem) {
    if (rank % 2 == 1)
      ctx.send(rank - 1, step, t.data(), bytes);
    else
      ctx.recv(rank + 1, step, t.data(), bytes);
  }
}

// Ring: reduce-scatter then all-gather, 2(n-1) steps each moving 1/n of the
// buffer: bandwidth-optimal for large messages.
void all_reduce_ring(CollectiveContext& ctx, const Tensor& t, ReduceOp op) {
  const int n = ctx.size();
  const int rank = ctx.rank();
  const size_t count = static_cast<size_t>(t.numel());
  const size_t esize = t.element_size();
  char* base = static_cast<char*>(t.data());
  auto chunk_begin = [&](int c) { return count * static_cast<size_t>(c) / static_cast<size_t>(n); };
  auto chunk_count = [&](int c) { return chunk_begin(c + 1) - chunk_begin(c); };
  const int right = (rank + 1) % n;
  const int left = (rank - 1 + n) % n;
  std::vector<char> tmp((count / n + 1) * esize);
  uint32_t step = 0;

  // Reduce-scatter: after step s, chunk (rank - s - 1) holds s+2 contributions;
  // at the end rank owns the full reduction of chunk (rank + 1) % n.
  for (int s = 0; s < n - 1; ++s, ++step) {
    int send_c = (rank - s + n) % n;
    int recv_c = (rank - s - 1 + n) % n;
    ctx.send_recv(right, base + chunk_begin(send_c) * esize, chunk_count(send_c) * esize, left, tmp.data(),
                  chunk_count(recv_c) * esize, step);
    // The incoming partial sum covers ranks recv_c+1 .. rank-1 (mod n) ; fold
    // it in as the "lower" operand so every chunk is reduced in ring order.
    reduction::combine(op, t.dtype(), base + chunk_begin(recv_c) * esize, tmp.data(),
                    base + chunk_begin(recv_c) * esize, chunk_count(recv_c));
  }
  // All-gather the reduced chunks around the ring.
  for (int s = 0; s < n - 1; ++s, ++step) {
    int send_c = (rank + 1 - s + n) % n;
    int recv_c = (rank - s + n) % n;
    ctx.send_recv(right, base + chunk_begin(send_c) * esize, chunk_count(send_c) * esize, left,
                  base + chunk_begin(recv_c) * esize, chunk_count(recv_c) * esize, step);
  }
}

void all_reduce(CollectiveContext& ctx, const Tensor& t, ReduceOp op) {
  if (ctx.size() > 1 && t.numel() > 0) {
    std::string forced = forced_algorithm("all_reduce");
    constexpr size_t kRingThreshold = 64 * 1024;
    if (forced == "ring") {
      all_reduce_ring(ctx, t, op);
    } else if (forced == "recursive_doubling") {
      all_reduce_recursive_doubling(ctx, t, op);
    } else if (!forced.empty()) {
      throw DistValueError("TDIST_ALGO_ALL_REDUCE=" + forced + " is not an all_reduce algorithm (ring, recursive_doubling)");
    } else if (t.nbytes() >= kRingThreshold && static_cast<size_t>(t.numel()) >= static_cast<size_t>(ctx.size())) {
      all_reduce_ring(ctx, t, op);
    } else {
      all_reduce_recursive_doubling(ctx, t, op);
    }
  }
  if (reduction::needs_finalize(op)) reduction::finalize(op, t.dtype(), t.data(), static_cast<size_t>(t.numel()), ctx.size());
}

}  // namespace tdist
