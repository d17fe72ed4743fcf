// tdist-bench built without CUDA (no nvcc when tdist was configured): --device
// cuda says so before anything runs.
#include <stdexcept>

#include "cuda_memory.h"

namespace tbench::cuda_memory {

namespace {
[[noreturn]] void absent() {
  throw std::runtime_error(
      "--device cuda: this tdist-bench was built without CUDA (CMake found no nvcc); install the CUDA toolkit and "
      "rebuild");
}
}  // namespace

bool built() { return false; }
int device_count() { return 0; }
void set_device(int) { absent(); }
std::string describe(int) { absent(); }
void* create_stream() { absent(); }
void destroy_stream(void*) {}
void* allocate(size_t) { absent(); }
void release(void*) {}
void upload(void*, const void*, size_t) { absent(); }
void download(void*, const void*, size_t) { absent(); }
void copy_async(void*, const void*, size_t, void*) { absent(); }
void synchronize(void*) { absent(); }

}  // namespace tbench::cuda_memory
