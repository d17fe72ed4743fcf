#include "cuda_memory.h"

#include <cuda_runtime_api.h>

#include <cstdio>
#include <stdexcept>

namespace tbench::cuda_memory {

namespace {

void check(cudaError_t rc, const std::string& call) {
  if (rc == cudaSuccess) return;
  int device = -1;
  cudaGetDevice(&device);
  throw std::runtime_error(call + " on cuda:" + std::to_string(device) + " failed: " + cudaGetErrorName(rc) + ": " +
                           cudaGetErrorString(rc));
}

std::string version(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }

}  // namespace

bool built() { return true; }

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // not sticky: clear it
    return 0;
  }
  return n;
}

void set_device(int device) { check(cudaSetDevice(device), "cudaSetDevice(" + std::to_string(device) + ")"); }

std::string describe(int device) {
  cudaDeviceProp p{};
  check(cudaGetDeviceProperties(&p, device), "cudaGetDeviceProperties");
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  char mem[32];
  std::snprintf(mem, sizeof mem, "%.1f GiB", static_cast<double>(p.totalGlobalMem) / (1ull << 30));
  return std::string(p.name) + " (sm_" + std::to_string(p.major) + std::to_string(p.minor) + ", " + mem +
         "), CUDA runtime " + version(runtime) + ", driver " + version(driver);
}

void* create_stream() {
  cudaStream_t s = nullptr;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  return s;
}

void destroy_stream(void* stream) { cudaStreamDestroy(static_cast<cudaStream_t>(stream)); }

void* allocate(size_t bytes) {
  void* p = nullptr;
  check(cudaMalloc(&p, bytes > 0 ? bytes : 1), "cudaMalloc(" + std::to_string(bytes) + " bytes)");
  return p;
}

void release(void* ptr) { cudaFree(ptr); }

void upload(void* device_dst, const void* host_src, size_t bytes) {
  if (bytes > 0) check(cudaMemcpy(device_dst, host_src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy (to the device)");
}

void download(void* host_dst, const void* device_src, size_t bytes) {
  if (bytes > 0) check(cudaMemcpy(host_dst, device_src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy (to the host)");
}

void copy_async(void* dst, const void* src, size_t bytes, void* stream) {
  if (bytes > 0)
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(stream)), "cudaMemcpyAsync");
}

void synchronize(void* stream) { check(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "cudaStreamSynchronize"); }

}  // namespace tbench::cuda_memory
