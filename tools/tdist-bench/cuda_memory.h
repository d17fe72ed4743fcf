// The CUDA runtime calls tdist-bench --device cuda makes for its own buffers
// and stream (tdist's are its library's business). cuda_memory.cpp where
// tdist is built with CUDA (it links the CUDA runtime); cuda_memory_absent.cpp
// elsewhere, whose calls say that this build has no CUDA. Errors are
// std::runtime_error naming the call, the device and the CUDA error.
#pragma once

#include <cstddef>
#include <string>

namespace tbench::cuda_memory {

bool built();  // whether this tdist-bench has the CUDA runtime
int device_count();  // 0 without a driver or a device
void set_device(int device);  // of the calling thread
// "NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB), CUDA runtime 13.0, driver 13.0"
std::string describe(int device);
void* create_stream();  // non-blocking, on the current device
void destroy_stream(void* stream);
void* allocate(size_t bytes);  // device memory (cudaMalloc), on the current device
void release(void* ptr);
// Synchronous copies between host and device memory.
void upload(void* device_dst, const void* host_src, size_t bytes);
void download(void* host_dst, const void* device_src, size_t bytes);
// A copy in `stream`'s order (device to device, or any direction).
void copy_async(void* dst, const void* src, size_t bytes, void* stream);
// Blocks the host until `stream` has run what was queued on it.
void synchronize(void* stream);

}  // namespace tbench::cuda_memory
