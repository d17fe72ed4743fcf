// The few CUDA driver functions the runtime API does not offer, found through
// cudaGetDriverEntryPointByVersion in the driver the static runtime has loaded, so that
// libtdist is not linked to libcuda (it loads, and reports "no device", where the driver is
// absent).
#pragma once

#include <cuda.h>

#include <string>

namespace tdist::device::cuda {

struct DriverEntryPoints {
  // Streams waiting for a word in memory (stream memory operations, always enabled from
  // CUDA 11.7 on: the v2 ABI asked for here).
  CUresult (*stream_wait_value32)(CUstream, CUdeviceptr, cuuint32_t, unsigned int) = nullptr;
  // The allocation a device pointer lies in: IPC handles name an allocation, so the offset
  // of an interior pointer travels with the handle.
  CUresult (*mem_get_address_range)(CUdeviceptr*, size_t*, CUdeviceptr) = nullptr;
  CUresult (*get_error_string)(CUresult, const char**) = nullptr;
  CUresult (*get_error_name)(CUresult, const char**) = nullptr;

  // "<string> (<name>)" of a driver error, or "CUresult <n>" without the names.
  std::string describe(CUresult result) const;
};

// Resolves them (each null when the driver lacks it); needs an initialised runtime.
DriverEntryPoints resolve_driver_entry_points();

}  // namespace tdist::device::cuda
