// The same-host IPC path of device tensors: when every rank of a group is on
// this host, all_reduce, broadcast, all_gather(_into_tensor) and
// reduce_scatter(_tensor) move data device to device through the ranks'
// mapped exchange buffers (ipc_exchange.h) and reduce with the runtime's
// kernels, in chunks of the buffer's half, with host barriers (the group's
// barrier engine: the shared-memory one on a host) between the steps:
//  - all_reduce: each rank copies its chunk into its buffer; barrier; rank r
//    combines slice r of every buffer into its own buffer (reduce-scatter);
//    barrier; every rank copies every reduced slice into its tensor;
//  - broadcast: the root copies its chunk in; barrier; the others copy it out;
//  - all_gather: each copies its input in; barrier; each copies every block out;
//  - reduce_scatter: each copies its n blocks in; barrier; rank r combines
//    block r of every buffer into its output.
// Several ranks may share a device. Every other operation is staged.
#pragma once

#include <cstddef>
#include <vector>

#include "algorithms/collective.h"
#include "backends/device_path/device_path.h"
#include "backends/device_path/ipc_exchange.h"
#include "engines/group_engines.h"
#include "work/device_work.h"

namespace tdist::ipc {

// TDIST_CUDA_PATH: auto (by size), staged, ipc (where it applies).
enum class PathChoice { Auto, Staged, Ipc };
PathChoice path_setting();

// Below this many bytes auto stages: a host round trip of a tiny message may
// beat the IPC path's two barriers and kernel launch. Not measured on a GPU
// yet (docs/cuda_data_paths.md): scripts/gpu_check.sh's benchmark decides.
inline constexpr size_t kMinBytes = size_t{32} << 10;

// Whether an operation's arguments are one the IPC path serves (matched by
// the argument types of TdistBackend's bodies), its size, and the host
// barriers it takes (each needs a sequence number of its own).
struct Plan {
  bool serves = false;
  size_t bytes = 0;
  int barriers = 0;
};
Plan plan(int n, const EngineCall&, const Tensor& t, const ReduceOp&);                     // all_reduce
Plan plan(int n, const EngineCall&, const Tensor& t, const int& root);                     // broadcast
Plan plan(int n, const EngineCall&, const std::vector<Tensor>& outs, const Tensor& in);    // all_gather
Plan plan(int n, const EngineCall&, const Tensor& out, const std::vector<Tensor>& ins, const ReduceOp&);  // reduce_scatter
template <typename... Args>
Plan plan(int, const Args&...) {
  return {};
}

// What an IPC collective works with; barrier() takes the next reserved tag.
struct Call {
  device::Runtime& rt;
  DevicePath::Streams& streams;
  IpcExchange& exchange;
  DeviceWork& work;
  CollectiveContext& ctx;
  Engine& barrier_engine;
  int barriers_done = 0;
  void barrier();
  void wait_for_copies();  // the host waits for what was queued on streams.in
};

void run(Call& call, const EngineCall&, const Tensor& t, const ReduceOp& op);
void run(Call& call, const EngineCall&, const Tensor& t, const int& root);
void run(Call& call, const EngineCall&, const std::vector<Tensor>& outs, const Tensor& in);
void run(Call& call, const EngineCall&, const Tensor& out, const std::vector<Tensor>& ins, const ReduceOp& op);
// Never called: plan() said the path does not serve these.
template <typename... Args>
void run(Call&, const Args&...) {}

}  // namespace tdist::ipc
