#include "cuda/driver_entry_points.h"

#include <cuda_runtime_api.h>

namespace tdist::device::cuda {

namespace {

// The ABI of `symbol` as of CUDA `version` (cuStreamWaitValue32 changed at 11.7 and
// cuMemGetAddressRange at 3.2: asking by version pins the signature declared above).
template <typename Fn>
void resolve(const char* symbol, unsigned version, Fn& fn) {
  void* address = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  if (cudaGetDriverEntryPointByVersion(symbol, &address, version, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess) {
    (void)cudaGetLastError();
    fn = nullptr;
    return;
  }
  fn = reinterpret_cast<Fn>(address);
}

}  // namespace

DriverEntryPoints resolve_driver_entry_points() {
  DriverEntryPoints d;
  resolve("cuStreamWaitValue32", 11070, d.stream_wait_value32);
  resolve("cuMemGetAddressRange", 3020, d.mem_get_address_range);
  resolve("cuGetErrorString", 6000, d.get_error_string);
  resolve("cuGetErrorName", 6000, d.get_error_name);
  return d;
}

std::string DriverEntryPoints::describe(CUresult result) const {
  const char* text = nullptr;
  const char* name = nullptr;
  if (get_error_string != nullptr) (void)get_error_string(result, &text);
  if (get_error_name != nullptr) (void)get_error_name(result, &name);
  if (text == nullptr || name == nullptr) return "CUresult " + std::to_string(static_cast<int>(result));
  return std::string(text) + " (" + name + ")";
}

}  // namespace tdist::device::cuda
