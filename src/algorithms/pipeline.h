// Segment pipelines: large transfers cut into segments that flow through a
// chain or a ring, so that a rank reduces or forwards one segment while the
// next ones are still on the wire, and works on data that is still in cache.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "tdist/reduce_op.h"
#include "algorithms/blocks.h"
#include "algorithms/collective.h"

namespace tdist {

// A ring keeps every link busy whatever the segment size, so its segments
// are large (fewer wake-ups); a chain's first segment crosses n-1 links
// before the last rank starts, so its segments are smaller.
enum class Pipeline { Ring, Chain };

// Bytes per segment: TDIST_ALGO_SEGMENT_BYTES when set (benchmarks, tests),
// else the pipeline's default, which depends on whether every rank is on one
// host and, for a ring, on the number of ranks (pipeline.cpp says why).
size_t segment_bytes(Pipeline kind, bool one_host = false, int ranks = 0);

// Number of segments to cut a block of `max_count` elements into.
size_t segments_for(size_t max_count, size_t esize, Pipeline kind, bool one_host = false, int ranks = 0);

// One rank's part of a stream of `units` segment transfers: unit u receives a
// segment from `from` and sends one to `to` (-1: none), with step tag
// first_step + u. The send of unit u carries what the receive of unit u - lag
// delivered, so it is posted once that receive was handled; units below `lag`
// send at once. A few receives and sends are kept posted ahead; empty
// segments are skipped (both ends know the sizes).
struct SegmentStream {
  int from = -1, to = -1;
  size_t units = 0;
  size_t lag = 0;
  uint32_t first_step = 0;
  size_t esize = 1;
  std::function<Span(size_t)> send;  // the segment unit u sends
  std::function<Span(size_t)> recv;  // where unit u's segment lands
  // When set and it returns non-null for unit u, the segment arrives in
  // scratch and recv(u) = op(incoming, local(u)): the incoming partial is the
  // left operand (it covers the ranks earlier in the stream).
  std::function<const char*(size_t)> local;
  ReduceOp op = ReduceOp::SUM;
  DType dtype = DType::UInt8;
  size_t max_segment_count = 0;  // largest recv segment, when `local` is set
};
void run_stream(CollectiveContext& ctx, const SegmentStream& stream);

// A ring of n positions (this rank at `pos`, receiving from the rank at
// pos-1 and sending to the rank at pos+1) over n blocks, pipelined in
// segments when it reduces. Steps 0 .. n-2 are the reduce-scatter (step s sends block
// pos-s-1, folds the incoming partial of block pos-s-2 into its own), after
// which this rank holds the full reduction of block pos; steps n-1 .. 2n-3 are
// the all-gather (step n-1+t sends block pos-t, receives block pos-t-1).
// A ring runs steps [first, end).
struct RingPlan {
  int pos = 0, left = 0, right = 0;
  Blocks work;                   // where blocks are reduced into or land; later steps send from here
  const Blocks* local = nullptr; // reduce-scatter: this rank's contributions (may be `work` itself)
  int first = 0, end = 0;
  ReduceOp op = ReduceOp::SUM;
  DType dtype = DType::UInt8;
  uint32_t first_step = 0;  // tag step of the first unit
};
void run_ring(CollectiveContext& ctx, const RingPlan& plan);

// The plain ring over the group's ranks in rank order for `work`: positions
// are ranks.
RingPlan rank_ring(CollectiveContext& ctx, Blocks work);

}  // namespace tdist
