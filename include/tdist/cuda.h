// CUDA devices as tdist sees them: whether this build has CUDA, how many
// devices there are, and the calling thread's current stream, which orders
// operations on CUDA tensors (as torch.cuda.current_stream() does for torch).
// No CUDA header is needed: streams are cudaStream_t passed as void*.
#pragma once

namespace tdist::cuda {

// Whether this build of tdist has CUDA compiled in (CMake found nvcc).
bool is_built();
// Whether CUDA tensors can be used here: a runtime and at least one device
// (TDIST_EMULATE_CUDA=N counts: N devices emulated in host memory).
bool is_available();
int device_count();  // 0 without a runtime or a device

// The calling thread's current stream on `device` (-1: its current device):
// an operation on a CUDA tensor of that device first waits (on the device,
// not the host) for the work already queued on it, and Work::synchronize()
// (which wait() calls for CUDA tensors) makes it wait for the operation.
// nullptr: the legacy default stream.
void set_current_stream(void* stream, int device = -1);
void* current_stream(int device = -1);

// Sets the current stream for a scope, as torch.cuda.stream(s).
class StreamGuard {
 public:
  explicit StreamGuard(void* stream, int device = -1);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  int device_;
  void* previous_;
};

}  // namespace tdist::cuda
