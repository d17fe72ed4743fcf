#include "device/device_runtime.h"

#include <mutex>

#include "tdist/errors.h"
#include "util/settings.h"

namespace tdist::device {

namespace {

struct CudaSlot {
  std::once_flag made;
  std::unique_ptr<Runtime> runtime;
};

CudaSlot& cuda_slot() {
  static CudaSlot slot;
  return slot;
}

}  // namespace

Runtime* runtime(DeviceType type) {
  if (type != DeviceType::CUDA) return nullptr;
  auto& slot = cuda_slot();
  std::call_once(slot.made, [&] {
    const int emulated = static_cast<int>(settings::get<"TDIST_EMULATE_CUDA">());
    slot.runtime = emulated > 0 ? make_emulated_cuda_runtime(emulated) : make_cuda_runtime();
  });
  return slot.runtime.get();
}

Runtime& require_runtime(DeviceType type, const std::string& what) {
  Runtime* rt = runtime(type);
  if (rt == nullptr)
    throw DistBackendError(what + ": tdist was built without CUDA (CMake found no nvcc; install the CUDA "
                           "toolkit and rebuild, or set TDIST_EMULATE_CUDA=N to emulate N devices in host memory)");
  if (rt->device_count() == 0)
    throw DistBackendError(what + ": no CUDA device: " + rt->unavailable_reason());
  return *rt;
}

}  // namespace tdist::device
