// torch's CUDA streams as tdist's current streams. tdist orders an operation
// on a CUDA tensor after the work queued on the calling thread's tdist
// current stream (tdist::cuda::current_stream), and Work::synchronize makes
// that stream wait for it; torch's programs expect the same of their own
// current stream (torch.cuda.current_stream(), as with ProcessGroupNCCL). So
// around every call the plugin makes tdist's current stream of the tensors'
// device torch's current stream of that device.
//
// Compiled with torch's CUDA headers where torch has CUDA and tdist was built
// with it (TDIST_TORCH_CUDA, python/torch/CMakeLists.txt); elsewhere no
// torch tensor can be on a CUDA device and these are no-ops.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>

#include "tdist/cuda.h"
#include "tdist/work.h"

namespace tdist_torch {

// Whether this plugin can carry CUDA tensors: torch and libtdist both have CUDA.
bool serves_cuda();

// The CUDA device of the first CUDA tensor among `tensors`, or -1.
int cuda_device_of(c10::ArrayRef<at::Tensor> tensors);
int cuda_device_of(const std::vector<std::vector<at::Tensor>>& lists);

// Makes tdist's current stream of `device` torch's current stream of it for
// the scope (device -1: nothing).
class TorchStreamScope {
 public:
  explicit TorchStreamScope(int device);

 private:
  std::optional<tdist::cuda::StreamGuard> guard_;  // not copyable, hence neither is the scope
};

// Runs `complete` (it marks a CUDA-aware torch Future completed) with torch's
// current stream of `device` set to a side stream that first waits, on the
// device, for every one of `works`: the Future's CUDA events are recorded
// after the operation, so Future.wait() orders the waiter's stream after it,
// as ProcessGroupNCCL's futures do. device -1: runs `complete` as it is.
void complete_after(const std::vector<std::shared_ptr<tdist::Work>>& works, int device,
                    const std::function<void()>& complete);

}  // namespace tdist_torch
