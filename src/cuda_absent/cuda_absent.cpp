// A build without the CUDA toolkit: no CUDA runtime (TDIST_EMULATE_CUDA still
// emulates devices in host memory, src/device/emulated_runtime.cpp).
#include "device/device_runtime.h"

namespace tdist::device {

std::unique_ptr<Runtime> make_cuda_runtime() { return nullptr; }
bool built_with_cuda() { return false; }

}  // namespace tdist::device
