// One options struct per operation, as torch's c10d (Types.hpp) has: what
// torch passes by keyword travels here, so that adding a field touches one
// struct and not every signature between the front and the backends. Build
// them with designated initializers: `AllReduceOptions{.op = ReduceOp::MAX,
// .timeout = 5s}`.
//
// Every struct carries
//   timeout   the deadline of this call; kGroupTimeout: the group's (as
//             torch's kUnsetTimeout).
//   async_op  false: the caller waits for the Work at once. The backend may
//             then run the operation on the caller's thread (when nothing of
//             the group is queued), which saves two thread hand-offs.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "tdist/reduce_op.h"

namespace tdist {

inline constexpr std::chrono::milliseconds kGroupTimeout{-1};

struct SendOptions {
  int tag = 0;
  std::chrono::milliseconds timeout = kGroupTimeout;
  bool async_op = true;
};

struct RecvOptions {
  int tag = 0;
  std::chrono::milliseconds timeout = kGroupTimeout;
  bool async_op = true;
};

struct BroadcastOptions {
  int root = 0;  // group rank
  std::chrono::milliseconds timeout = kGroupTimeout;
  bool async_op = true;
};

struct AllReduceOptions {
  ReduceOp op = ReduceOp::SUM;
  std::chrono::milliseconds timeout = kGroupTimeout;
  bool async_op = true;
};

// all_reduce_coalesced: every tensor of the list reduced with `op`, as one
// operation (one Work, one sequence number on every rank).
struct AllReduceCoalescedOptions {
  ReduceOp op = ReduceOp::SUM;
  std::chrono::milliseconds timeout = kGroupTimeout;
  bool async_op = true;
};

struct ReduceOptions {
  int root = 0;  // group rank
  ReduceOp op = ReduceOp::SUM;
  std::chrono::milliseconds timeout = kGroupTimeout;
  bool async_op = true;
};

struct AllGatherOptions {
  std::chrono::milliseconds timeout = kGroupTimeout;
  bool async_op = true;
};

struct GatherOptions {
  int root = 0;  // group rank
  std::chrono::milliseconds timeout = kGroupTimeout;
  bool async_op = true;
};

struct ScatterOptions {
  int root = 0;  // group rank
  std::chrono::milliseconds timeout = kGroupTimeout;
  bool async_op = true;
};

struct ReduceScatterOptions {
  ReduceOp op = ReduceOp::SUM;
  std::chrono::milliseconds timeout = kGroupTimeout;
  bool async_op = true;
};

struct AllToAllOptions {
  // all_to_all_single only: rows of the first dimension per rank; empty
  // means equal splits.
  std::vector<int64_t> output_split_sizes{};
  std::vector<int64_t> input_split_sizes{};
  std::chrono::milliseconds timeout = kGroupTimeout;
  bool async_op = true;
};

struct BarrierOptions {
  std::chrono::milliseconds timeout = kGroupTimeout;
  bool async_op = true;
};

struct MonitoredBarrierOptions {
  // Rank 0 waits this long for every rank (kGroupTimeout: the group's).
  std::chrono::milliseconds timeout = kGroupTimeout;
  bool wait_all_ranks = false;  // name every missing rank, not only the first
};

}  // namespace tdist
