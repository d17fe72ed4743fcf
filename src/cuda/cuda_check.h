// CUDA errors as tdist errors, and the device guard every call that depends on the
// calling thread's current device runs under. Only src/cuda includes this.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

namespace tdist::device::cuda {

// Throws DistBackendError: "<call> on cuda:<device> (<detail>) failed: <error string>
// (<error name>)"; device -1 leaves the device out. Clears the thread's last error first
// (a non-sticky error would otherwise be reported again by the next unrelated call).
[[noreturn]] void throw_cuda_error(cudaError_t error, const char* call, int device, const std::string& detail);
// The same message as a warning, for calls that release something (destroy a
// stream or event, free memory, close a mapping): they run in destructors and
// at exit, after the CUDA runtime may have unloaded, where a throw would end
// the process. Nothing is left to do about such a failure but to say it.
void warn_cuda_error(cudaError_t error, const char* call, int device, const std::string& detail);

// "<error string> (<error name>)".
std::string describe_error(cudaError_t error);

// Makes `device` the calling thread's current device for a scope and restores the previous
// one; does nothing when it already is (cudaGetDevice is a thread-local read).
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

}  // namespace tdist::device::cuda
