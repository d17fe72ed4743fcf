// The one seam between tdist and a device's runtime (CUDA): everything the
// library does with device memory, streams and kernels goes through a
// device::Runtime, so no file outside the CUDA-only folders (src/cuda,
// src/backends/nccl) includes a CUDA header, and a build without the toolkit is
// the same library minus those folders.
//
// Two runtimes implement it:
//  - src/cuda/cuda_runtime.cpp: the CUDA runtime API (built where nvcc is found);
//  - src/device/emulated_runtime.cpp: "cuda" devices emulated in host memory
//    (TDIST_EMULATE_CUDA=N devices), where streams run every step at once and
//    IPC handles are memfds. It lets the data paths of CUDA tensors (staging,
//    IPC exchange, the kernels' callers) run in CI on machines without a GPU;
//    it proves the logic, not the CUDA calls.
//
// Handles (streams, events) are opaque pointers owned by the runtime that made
// them. A null stream is the device's legacy default stream.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "tdist/dtype.h"
#include "tdist/reduce_op.h"

namespace tdist::device {

using StreamHandle = void*;
using EventHandle = void*;

class Runtime {
 public:
  virtual ~Runtime() = default;

  // "cuda 13.0, driver 13.0", "emulated cuda (2 devices in host memory)".
  virtual std::string describe() const = 0;
  // Devices present; 0 when there is none (no GPU, no driver). Never throws.
  virtual int device_count() const = 0;
  // Why there is no device, when device_count() is 0 ("cudaGetDeviceCount:
  // no CUDA-capable device is detected"); "" otherwise.
  virtual std::string unavailable_reason() const = 0;
  virtual int current_device() const = 0;  // of the calling thread
  virtual void set_device(int index) = 0;   // of the calling thread

  // The calling thread's current stream on `device` (what tdist::cuda::
  // set_current_stream set, torch's current stream in the plugin; else the
  // default stream, null). Operations on device tensors are ordered after the
  // work queued on it.
  virtual StreamHandle current_stream(int device) const = 0;

  // A non-blocking stream of tdist's own on `device`.
  virtual StreamHandle create_stream(int device) = 0;
  virtual void destroy_stream(StreamHandle stream) = 0;
  // Events without timing.
  virtual EventHandle create_event(int device) = 0;
  virtual void destroy_event(EventHandle event) = 0;
  virtual void record(EventHandle event, StreamHandle stream) = 0;
  // `stream` waits (on the device) for the last record of `event`.
  virtual void stream_wait(StreamHandle stream, EventHandle event) = 0;
  // Blocks the calling thread until the last record of `event` has run.
  virtual void synchronize(EventHandle event) = 0;
  virtual bool query(EventHandle event) = 0;  // true: done
  virtual void synchronize_stream(StreamHandle stream) = 0;
  // Whether `stream` can wait on the device for a 32-bit word in pinned host
  // memory (cuStreamWaitValue32): lets a Work order the caller's stream after
  // work the host has not issued yet, without blocking the host.
  virtual bool can_wait_on_host_word(int device) const = 0;
  // `stream` waits until *word >= value (word in pinned memory from alloc_pinned).
  virtual void stream_wait_host_word(StreamHandle stream, const uint32_t* word, uint32_t value) = 0;

  // Memory. alloc_device returns memory that ipc_handle can export.
  virtual void* alloc_device(int device, size_t bytes) = 0;
  virtual void free_device(int device, void* ptr) = 0;
  virtual void* alloc_pinned(size_t bytes) = 0;  // page-locked host memory
  virtual void free_pinned(void* ptr) = 0;
  // Copies bytes in any direction (unified addressing), in stream order.
  virtual void copy(void* dst, const void* src, size_t bytes, StreamHandle stream) = 0;
  // The device a pointer belongs to, or -1 for host memory: the front checks
  // that a tensor said to be on cuda:N really is.
  virtual int device_of(const void* ptr) const = 0;

  // Kernels, in stream order. acc[i] = acc[i] (op) in[i] for i < count, with
  // the semantics of reduction::accumulate (src/reduce/reduction_kernels.h).
  virtual void accumulate(ReduceOp op, DType dtype, void* acc, const void* in, size_t count,
                          StreamHandle stream) = 0;
  // out[i] = sum over k < n of ins[k][i] (op): one pass over n inputs (n <= 16).
  virtual void combine(ReduceOp op, DType dtype, void* out, const void* const* ins, int n, size_t count,
                       StreamHandle stream) = 0;
  // AVG divides by contributors, PREMUL_SUM multiplies by op.factor(); others nothing.
  virtual void finalize(ReduceOp op, DType dtype, void* data, size_t count, int contributors,
                        StreamHandle stream) = 0;

  // Inter-process: the handle of memory from alloc_device (a printable
  // string a peer on this host passes to ipc_open), and the mapping of a
  // peer's handle, valid on `device` until ipc_close.
  virtual std::string ipc_handle(void* device_ptr) = 0;
  virtual void* ipc_open(int device, const std::string& handle) = 0;
  virtual void ipc_close(void* mapped) = 0;
};

// The runtime of a device type: null when this build has none for it (no
// CUDA toolkit when it was built) and no emulation is asked for
// (TDIST_EMULATE_CUDA). Made on first use; lives until the process ends.
Runtime* runtime(DeviceType type);
// The same, throwing DistBackendError that says why there is no runtime or no
// device ("tdist was built without CUDA (no nvcc found)"; "no CUDA device:
// ..."); `what` names the caller ("all_reduce of float32[8] on cuda:0").
Runtime& require_runtime(DeviceType type, const std::string& what);
// Whether this build has the CUDA runtime compiled in.
bool built_with_cuda();

// Made by src/cuda (null in a build without it) and src/device/emulated_runtime.cpp.
std::unique_ptr<Runtime> make_cuda_runtime();
// `patience`: how long an emulated wait on host words may last before it is
// reported as the hang it would be on a GPU (emulated_runtime.cpp).
std::unique_ptr<Runtime> make_emulated_cuda_runtime(int devices,
                                                    std::chrono::milliseconds patience = std::chrono::seconds(60));

}  // namespace tdist::device
