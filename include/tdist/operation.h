// One operation as it travels below the front: the front (ProcessGroup)
// builds an Operation once from a call's arguments and options struct,
// validates it, opens its flight recorder entry in it, and hands it to the
// group's backend, which passes it down to where the operation runs. Nothing
// about a call travels beside it (no thread-locals, no fields written on the
// way down).
//
// Adding an operation: its OpKind and name here (kOpNames), its front
// function, its check in validate.cpp and, where a backend has nothing better,
// its composite in Backend::run (backend.cpp). docs/architecture.md lists the
// files.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <span>
#include <string_view>

#include "tdist/dtype.h"
#include "tdist/options.h"
#include "tdist/reduce_op.h"
#include "tdist/tensor.h"

namespace tdist {

namespace trace {
class FlightScope;
}

// Every operation a backend carries. The values are stable: the flight
// recorder stores them in its entries, so a new kind goes at the end.
enum class OpKind : uint8_t {
  Send, Recv, Broadcast, AllReduce, AllReduceCoalesced, Barrier, MonitoredBarrier, Reduce, AllGather,
  AllGatherIntoTensor, Gather, Scatter, ReduceScatter, ReduceScatterTensor, AllToAll, AllToAllSingle,
  AllGatherCoalesced,
};

// torch's names of the operations, by OpKind: what errors, traces and dumps say.
inline constexpr std::array<std::string_view, 17> kOpNames = {
    "send", "recv", "broadcast", "all_reduce", "all_reduce_coalesced", "barrier", "monitored_barrier", "reduce",
    "all_gather", "all_gather_into_tensor", "gather", "scatter", "reduce_scatter", "reduce_scatter_tensor",
    "all_to_all", "all_to_all_single", "all_gather_coalesced",
};
static_assert(kOpNames.size() == static_cast<size_t>(OpKind::AllGatherCoalesced) + 1, "one name per OpKind");

// A NUL-terminated name (every entry of kOpNames is a literal).
inline const char* op_name(OpKind kind) {
  const auto i = static_cast<size_t>(kind);
  return i < kOpNames.size() ? kOpNames[i].data() : "unknown";
}

// Which tensors an operation reads and writes, by kind (the front fills them):
//   send, recv, broadcast, all_reduce   inputs: the tensor (recv, broadcast
//                                       and all_reduce write it in place)
//   all_reduce_coalesced                inputs: the tensors, in place
//   reduce                              inputs: the tensor
//   all_gather, gather                  inputs: the input; outputs: one per
//                                       rank (gather: on the root only)
//   all_gather_into_tensor              inputs: the input; outputs: the output
//   all_gather_coalesced                inputs: n tensors; outputs: n x size(),
//                                       input i of rank r at outputs[i * size() + r]
//   scatter                             inputs: one per rank (root only); outputs: the output
//   reduce_scatter                      inputs: one per rank; outputs: the output
//   reduce_scatter_tensor               inputs: the input; outputs: the output
//   all_to_all                          inputs, outputs: one per rank
//   all_to_all_single                   inputs: the input; outputs: the output
//   barrier, monitored_barrier          none
// The spans point at the caller's tensors, valid until the backend returns:
// a backend that runs the operation later copies what it keeps.
struct Operation {
  OpKind kind = OpKind::Barrier;
  std::span<const Tensor> inputs{};
  std::span<const Tensor> outputs{};
  int root = -1;  // group rank: broadcast, reduce, gather, scatter
  int peer = -1;  // group rank: send, recv (kAnySource: any)
  int tag = 0;    // send, recv
  ReduceOp reduce_op = ReduceOp::SUM;
  // all_to_all_single: rows of the first dimension per rank; empty: equal.
  std::span<const int64_t> output_split_sizes{};
  std::span<const int64_t> input_split_sizes{};
  bool wait_all_ranks = false;  // monitored_barrier
  Device device{};              // of its tensors (the front checked they agree)
  // The call's deadline, resolved by the front: the call's own, else the
  // group's. Never kGroupTimeout below the front.
  std::chrono::milliseconds timeout = kGroupTimeout;
  bool async_op = true;  // false: the caller waits at once
  // The flight recorder's entry of this call (trace/flight_recorder.h), or
  // null: a backend that stamps its operations claims it (trace::claim_mark);
  // the front ends an entry no backend claimed from the Work it gets back.
  trace::FlightScope* trace = nullptr;

  const char* name() const { return op_name(kind); }
  // The one tensor of a single-tensor operation (inputs[0]) and its output.
  const Tensor& tensor() const { return inputs[0]; }
  const Tensor& output() const { return outputs[0]; }
};

}  // namespace tdist
