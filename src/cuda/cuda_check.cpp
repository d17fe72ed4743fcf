#include "cuda/cuda_check.h"

#include "tdist/errors.h"
#include "util/logging.h"

namespace tdist::device::cuda {

std::string describe_error(cudaError_t error) {
  return std::string(cudaGetErrorString(error)) + " (" + cudaGetErrorName(error) + ")";
}

namespace {
std::string cuda_error_message(cudaError_t error, const char* call, int device, const std::string& detail) {
  (void)cudaGetLastError();
  std::string message = call;
  if (device >= 0) message += " on cuda:" + std::to_string(device);
  if (!detail.empty()) message += " (" + detail + ")";
  return message + " failed: " + describe_error(error);
}
}  // namespace

void throw_cuda_error(cudaError_t error, const char* call, int device, const std::string& detail) {
  throw DistBackendError(cuda_error_message(error, call, device, detail));
}

void warn_cuda_error(cudaError_t error, const char* call, int device, const std::string& detail) {
  log_line(LogLevel::Warn, cuda_error_message(error, call, device, detail));
}

DeviceGuard::DeviceGuard(int device) {
  int current = -1;
  if (cudaError_t e = cudaGetDevice(&current); e != cudaSuccess)
    throw_cuda_error(e, "cudaGetDevice", -1, "before making cuda:" + std::to_string(device) + " current");
  if (current == device || device < 0) return;
  if (cudaError_t e = cudaSetDevice(device); e != cudaSuccess) throw_cuda_error(e, "cudaSetDevice", device, "");
  previous_ = current;
}

DeviceGuard::~DeviceGuard() {
  // Restoring a device that was current a moment ago does not fail; if it did, there is
  // nothing better to do in a destructor than leave the thread on the guarded device.
  if (previous_ >= 0) (void)cudaSetDevice(previous_);
}

}  // namespace tdist::device::cuda
