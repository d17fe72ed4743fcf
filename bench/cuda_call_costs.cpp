// What the CUDA calls the tdist backend's device path makes cost on this
// machine: the first GPU run measured 619 us for a staged 8-byte all_reduce of
// 4 ranks on one GPU, and this says which calls that time goes to (under a
// sandbox such as gVisor every call that reaches the driver is intercepted).
// With an argument P > 1, P processes (forked before any CUDA call) run the
// same loops at once on the one GPU, as P ranks do: without MPS the GPU
// time-slices between their contexts. Each line: mean microseconds per
// iteration of N, after a warm-up. Built and run by scripts/gpu_check.sh:
//   g++ -O2 -std=c++20 bench/cuda_call_costs.cpp -I$CUDA/include -L$CUDA/lib64 -lcudart -o cuda_call_costs
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <thread>

namespace {

void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "cuda_call_costs: %s: %s\n", what, cudaGetErrorString(e));
  std::exit(1);
}

// "[process p of P] " where several run at once, else nothing.
char prefix[32] = "";

// Mean microseconds of `body` over `n` runs after `n / 10` unmeasured ones.
void measure(const char* name, int n, const std::function<void()>& body) {
  for (int i = 0; i < n / 10; ++i) body();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) body();
  const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / n;
  std::printf("%s%-58s %9.2f us\n", prefix, name, us);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const int procs = argc > 1 ? std::atoi(argv[1]) : 1;
  if (procs > 1) {
    for (int p = 0; p < procs; ++p) {
      const pid_t pid = fork();
      if (pid < 0) return 1;
      if (pid == 0) {
        std::snprintf(prefix, sizeof prefix, "[process %d of %d] ", p, procs);
        break;
      }
      if (p == procs - 1) {
        int failed = 0;
        for (int i = 0; i < procs; ++i) {
          int status = 0;
          wait(&status);
          failed += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        }
        return failed == 0 ? 0 : 1;
      }
    }
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("cuda_call_costs: no CUDA device\n");
    return 2;
  }
  check(cudaSetDevice(0), "cudaSetDevice");
  cudaStream_t s = nullptr, t = nullptr;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  check(cudaStreamCreateWithFlags(&t, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  cudaEvent_t ev = nullptr;
  check(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  void* dev = nullptr;
  check(cudaMalloc(&dev, 1 << 20), "cudaMalloc");
  void* pinned = nullptr;
  check(cudaHostAlloc(&pinned, 1 << 20, cudaHostAllocPortable | cudaHostAllocMapped), "cudaHostAlloc");
  auto* word = static_cast<uint32_t*>(pinned);
  *word = 0;

  const int n = 2000;
  measure("cudaGetDevice", n, [] { int d; cudaGetDevice(&d); });
  measure("cudaSetDevice", n, [] { cudaSetDevice(0); });
  measure("cudaStreamGetDevice", n, [&] { int d; cudaStreamGetDevice(s, &d); });
  measure("cudaPointerGetAttributes (device memory)", n, [&] { cudaPointerAttributes a; cudaPointerGetAttributes(&a, dev); });
  measure("cudaEventCreate + cudaEventDestroy", n, [] {
    cudaEvent_t e;
    cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
    cudaEventDestroy(e);
  });
  measure("cudaEventRecord (idle stream)", n, [&] { cudaEventRecord(ev, s); });
  measure("cudaEventRecord + cudaEventSynchronize (idle)", n, [&] {
    cudaEventRecord(ev, s);
    cudaEventSynchronize(ev);
  });
  measure("cudaStreamSynchronize (idle)", n, [&] { cudaStreamSynchronize(s); });
  measure("cudaStreamWaitEvent (other stream) + record + sync", n, [&] {
    cudaEventRecord(ev, s);
    cudaStreamWaitEvent(t, ev, 0);
    cudaStreamSynchronize(t);
  });
  measure("cudaMemcpyAsync 8 B device->pinned + cudaStreamSynchronize", n, [&] {
    cudaMemcpyAsync(static_cast<char*>(pinned) + 64, dev, 8, cudaMemcpyDefault, s);
    cudaStreamSynchronize(s);
  });
  measure("cudaMemcpyAsync 8 B pinned->device + cudaStreamSynchronize", n, [&] {
    cudaMemcpyAsync(dev, static_cast<char*>(pinned) + 64, 8, cudaMemcpyDefault, s);
    cudaStreamSynchronize(s);
  });
  measure("both copies + event record + event sync (a staged op's device part)", n, [&] {
    cudaMemcpyAsync(static_cast<char*>(pinned) + 64, dev, 8, cudaMemcpyDefault, s);
    cudaEventRecord(ev, s);
    cudaEventSynchronize(ev);
    cudaMemcpyAsync(dev, static_cast<char*>(pinned) + 64, 8, cudaMemcpyDefault, s);
    cudaEventRecord(ev, s);
    cudaEventSynchronize(ev);
  });
  measure("cudaHostGetDevicePointer", n, [&] { void* p; cudaHostGetDevicePointer(&p, word, 0); });

  // The host word: the stream waits on it, the host sets it, then waits for the stream.
  using WaitValue = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
  void* address = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  if (cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &address, 11070, cudaEnableDefault, &found) ==
          cudaSuccess &&
      found == cudaDriverEntryPointSuccess) {
    auto wait_value = reinterpret_cast<WaitValue>(address);
    void* device_word = nullptr;
    check(cudaHostGetDevicePointer(&device_word, word, 0), "cudaHostGetDevicePointer");
    uint32_t value = 0;
    measure("cuStreamWaitValue32 (already met) + stream sync", n, [&] {
      wait_value(s, reinterpret_cast<CUdeviceptr>(device_word), value, CU_STREAM_WAIT_VALUE_GEQ);
      cudaStreamSynchronize(s);
    });
    measure("host word: wait queued, host sets it, stream sync", n, [&] {
      ++value;
      wait_value(s, reinterpret_cast<CUdeviceptr>(device_word), value, CU_STREAM_WAIT_VALUE_GEQ);
      cudaEventRecord(ev, s);
      std::atomic_ref<uint32_t>(*word).store(value, std::memory_order_release);
      cudaEventSynchronize(ev);
    });
    measure("host word set by another thread after 20 us, stream sync", n / 4, [&] {
      ++value;
      wait_value(s, reinterpret_cast<CUdeviceptr>(device_word), value, CU_STREAM_WAIT_VALUE_GEQ);
      std::thread setter([&, v = value] {
        const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(20);
        while (std::chrono::steady_clock::now() < until) {
        }
        std::atomic_ref<uint32_t>(*word).store(v, std::memory_order_release);
      });
      cudaStreamSynchronize(s);
      setter.join();
    });
    measure("thread start + join alone (the line above's overhead)", n / 4, [] { std::thread([] {}).join(); });
  } else {
    std::printf("cuStreamWaitValue32: not found in the driver\n");
  }
  measure("cudaHostAlloc + cudaFreeHost 4 KiB", 200, [] {
    void* p;
    cudaHostAlloc(&p, 4096, cudaHostAllocPortable | cudaHostAllocMapped);
    cudaFreeHost(p);
  });
  return 0;
}
