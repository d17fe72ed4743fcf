#include "cuda_streams.h"

#ifdef TDIST_TORCH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace tdist_torch {

bool serves_cuda() {
#ifdef TDIST_TORCH_CUDA
  return tdist::cuda::is_built();
#else
  return false;
#endif
}

int cuda_device_of(c10::ArrayRef<at::Tensor> tensors) {
  for (const at::Tensor& t : tensors)
    if (t.defined() && t.device().is_cuda()) return t.device().index();
  return -1;
}

int cuda_device_of(const std::vector<std::vector<at::Tensor>>& lists) {
  for (const auto& list : lists)
    if (int d = cuda_device_of(list); d >= 0) return d;
  return -1;
}

TorchStreamScope::TorchStreamScope(int device) {
#ifdef TDIST_TORCH_CUDA
  if (device >= 0)
    guard_.emplace(c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device)).stream(), device);
#else
  (void)device;
#endif
}

void complete_after(const std::vector<std::shared_ptr<tdist::Work>>& works, int device,
                    const std::function<void()>& complete) {
#ifdef TDIST_TORCH_CUDA
  if (device >= 0) {
    // A pooled stream of torch's (not the completing thread's current one,
    // which other work of that thread may be queued on).
    c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool(false, static_cast<c10::DeviceIndex>(device));
    {
      tdist::cuda::StreamGuard ordered(side.stream(), device);
      for (const auto& w : works) w->synchronize();
    }
    c10::cuda::CUDAStreamGuard current(side);
    complete();
    return;
  }
#else
  (void)works;
  (void)device;
#endif
  complete();
}

}  // namespace tdist_torch
