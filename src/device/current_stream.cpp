#include "device/current_stream.h"

#include <vector>

#include "device/device_runtime.h"
#include "tdist/cuda.h"
#include "tdist/errors.h"

namespace tdist::device {

namespace {
// Indexed by device; a thread that never sets one allocates nothing.
thread_local std::vector<void*> streams;
}  // namespace

void* thread_current_stream(int device) {
  return device >= 0 && static_cast<size_t>(device) < streams.size() ? streams[device] : nullptr;
}

void set_thread_current_stream(int device, void* stream) {
  if (device < 0) throw DistValueError("set_current_stream: device " + std::to_string(device) + " is not a device index");
  if (static_cast<size_t>(device) >= streams.size()) streams.resize(device + 1, nullptr);
  streams[device] = stream;
}

}  // namespace tdist::device

namespace tdist::cuda {

namespace {
int resolve(int device) {
  if (device >= 0) return device;
  auto* rt = device::runtime(DeviceType::CUDA);
  return rt != nullptr && rt->device_count() > 0 ? rt->current_device() : 0;
}
}  // namespace

bool is_built() { return device::built_with_cuda(); }

bool is_available() { return device_count() > 0; }

int device_count() {
  auto* rt = device::runtime(DeviceType::CUDA);
  return rt == nullptr ? 0 : rt->device_count();
}

void set_current_stream(void* stream, int device) { device::set_thread_current_stream(resolve(device), stream); }

void* current_stream(int device) { return device::thread_current_stream(resolve(device)); }

StreamGuard::StreamGuard(void* stream, int device) : device_(resolve(device)), previous_(current_stream(device_)) {
  set_current_stream(stream, device_);
}

StreamGuard::~StreamGuard() { device::set_thread_current_stream(device_, previous_); }

}  // namespace tdist::cuda
