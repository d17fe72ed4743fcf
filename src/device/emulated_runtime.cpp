// "cuda" devices emulated in host memory (TDIST_EMULATE_CUDA=N): the data
// paths of CUDA tensors run their real logic (staging, IPC exchange, the
// kernels' callers, stream and event ordering calls) on machines without a GPU.
//
// What is emulated and how:
//  - device memory is a memfd mapped shared, so a peer process on this host
//    can map the same pages, as cudaIpcOpenMemHandle maps a peer's allocation;
//    the handle is "<pid>:<fd>:<offset>" and the peer opens /proc/<pid>/fd/<fd>
//    (allowed between processes of one user unless ptrace is restricted);
//  - every operation "on a stream" runs at once on the calling thread, so an
//    event is complete as soon as it is recorded and waiting on one is free;
//  - the kernels are tdist::reduction's CPU kernels;
//  - device_of answers from a table of the allocations and mappings made here.
// It cannot wait on a host word (can_wait_on_host_word is false): the callers'
// other branch, blocking the host, is what runs here.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>

#include "device/current_stream.h"
#include "device/device_runtime.h"
#include "reduce/reduction_kernels.h"
#include "tdist/errors.h"

namespace tdist::device {

namespace {

thread_local int current_device_index = 0;

struct EmulatedStream {
  int device;
};
struct EmulatedEvent {
  int device;
};

// One region of emulated device memory: an allocation of this process (it
// owns the memfd) or a peer's allocation mapped here.
struct Region {
  size_t bytes = 0;     // mapped length
  int device = 0;
  int fd = -1;          // the memfd of an allocation of this process; -1 for a mapping
  void* user = nullptr;  // what was handed out (a mapping may start inside the region)
};

std::string errno_text(int err) { return std::string(std::strerror(err)); }

size_t round_to_pages(size_t bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return std::max<size_t>(page, (bytes + page - 1) / page * page);
}

class EmulatedRuntime final : public Runtime {
 public:
  explicit EmulatedRuntime(int devices) : devices_(devices) {}

  ~EmulatedRuntime() override {
    // Memory still held at exit is the process's to lose: unmap nothing here
    // (a static destructor may run while other threads still use it).
  }

  std::string describe() const override {
    return "emulated cuda (" + std::to_string(devices_) + " device" + (devices_ == 1 ? "" : "s") +
           " in host memory, TDIST_EMULATE_CUDA)";
  }
  int device_count() const override { return devices_; }
  std::string unavailable_reason() const override { return ""; }
  int current_device() const override { return current_device_index; }
  void set_device(int index) override {
    check_device(index, "set_device");
    current_device_index = index;
  }

  StreamHandle current_stream(int device) const override { return thread_current_stream(device); }

  StreamHandle create_stream(int device) override {
    check_device(device, "create_stream");
    return new EmulatedStream{device};
  }
  void destroy_stream(StreamHandle stream) override { delete static_cast<EmulatedStream*>(stream); }
  EventHandle create_event(int device) override {
    check_device(device, "create_event");
    return new EmulatedEvent{device};
  }
  void destroy_event(EventHandle event) override { delete static_cast<EmulatedEvent*>(event); }
  // Everything recorded before has already run: an event is complete at once.
  void record(EventHandle, StreamHandle) override {}
  void stream_wait(StreamHandle, EventHandle) override {}
  void synchronize(EventHandle) override {}
  bool query(EventHandle) override { return true; }
  void synchronize_stream(StreamHandle) override {}
  bool can_wait_on_host_word(int) const override { return false; }
  void stream_wait_host_word(StreamHandle, const uint32_t*, uint32_t) override {
    throw DistBackendError("emulated cuda: stream_wait_host_word is not available (can_wait_on_host_word is false)");
  }

  void* alloc_device(int device, size_t bytes) override {
    check_device(device, "alloc_device");
    const std::string what = "emulated cuda: alloc_device of " + std::to_string(bytes) + " bytes on cuda:" +
                             std::to_string(device);
    int fd = memfd_create("tdist-emulated-cuda", MFD_CLOEXEC);
    if (fd < 0) throw DistBackendError(what + ": memfd_create: " + errno_text(errno));
    const size_t length = round_to_pages(bytes);
    if (ftruncate(fd, static_cast<off_t>(length)) != 0) {
      const int err = errno;
      ::close(fd);
      throw DistBackendError(what + ": ftruncate: " + errno_text(err));
    }
    void* p = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      throw DistBackendError(what + ": mmap: " + errno_text(err));
    }
    std::lock_guard<std::mutex> lock(mu_);
    regions_[reinterpret_cast<uintptr_t>(p)] = Region{length, device, fd, p};
    return p;
  }

  void free_device(int, void* ptr) override {
    if (ptr == nullptr) return;
    Region region;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = regions_.find(reinterpret_cast<uintptr_t>(ptr));
      if (it == regions_.end() || it->second.fd < 0)
        throw DistBackendError("emulated cuda: free_device of a pointer alloc_device did not return");
      region = it->second;
      regions_.erase(it);
    }
    munmap(ptr, region.bytes);
    ::close(region.fd);
  }

  // Host memory is already "pinned" here: nothing distinguishes it.
  void* alloc_pinned(size_t bytes) override {
    void* p = std::aligned_alloc(64, std::max<size_t>(64, (bytes + 63) / 64 * 64));
    if (p == nullptr) throw DistBackendError("emulated cuda: alloc_pinned of " + std::to_string(bytes) + " bytes failed");
    return p;
  }
  void free_pinned(void* ptr) override { std::free(ptr); }

  void copy(void* dst, const void* src, size_t bytes, StreamHandle) override {
    if (bytes != 0 && dst != src) std::memmove(dst, src, bytes);
  }

  int device_of(const void* ptr) const override {
    const auto at = reinterpret_cast<uintptr_t>(ptr);
    std::lock_guard<std::mutex> lock(mu_);
    auto it = regions_.upper_bound(at);
    if (it == regions_.begin()) return -1;
    --it;
    return at < it->first + it->second.bytes ? it->second.device : -1;
  }

  void accumulate(ReduceOp op, DType dtype, void* acc, const void* in, size_t count, StreamHandle) override {
    if (count != 0) reduction::accumulate(op, dtype, acc, in, count);
  }

  void combine(ReduceOp op, DType dtype, void* out, const void* const* ins, int n, size_t count,
               StreamHandle) override {
    if (n < 1 || n > 16)
      throw DistValueError("emulated cuda: combine of " + std::to_string(n) + " inputs (1 to 16 are allowed)");
    if (count == 0) return;
    const size_t bytes = count * dtype_size(dtype);
    if (n == 1) {
      if (out != ins[0]) std::memmove(out, ins[0], bytes);
      return;
    }
    // out may be one of the inputs (an in-place reduction): start from that
    // one, so that no input is overwritten before it is read.
    int first = 0;
    for (int k = 0; k < n; ++k)
      if (ins[k] == out) first = k;
    const int second = first == 0 ? 1 : 0;
    reduction::combine(op, dtype, out, ins[first], ins[second], count);
    for (int k = 0; k < n; ++k)
      if (k != first && k != second) reduction::accumulate(op, dtype, out, ins[k], count);
  }

  void finalize(ReduceOp op, DType dtype, void* data, size_t count, int contributors, StreamHandle) override {
    if (count != 0) reduction::finalize(op, dtype, data, count, contributors);
  }

  std::string ipc_handle(void* device_ptr) override {
    const auto at = reinterpret_cast<uintptr_t>(device_ptr);
    std::lock_guard<std::mutex> lock(mu_);
    auto it = regions_.upper_bound(at);
    if (it != regions_.begin()) {
      --it;
      if (it->second.fd >= 0 && at < it->first + it->second.bytes)
        return std::to_string(getpid()) + ":" + std::to_string(it->second.fd) + ":" + std::to_string(at - it->first);
    }
    throw DistBackendError("emulated cuda: ipc_handle of a pointer that is not in memory from alloc_device");
  }

  void* ipc_open(int device, const std::string& handle) override {
    check_device(device, "ipc_open");
    long pid = 0, fd = 0;
    unsigned long long offset = 0;
    if (std::sscanf(handle.c_str(), "%ld:%ld:%llu", &pid, &fd, &offset) != 3)
      throw DistBackendError("emulated cuda: ipc_open: '" + handle.substr(0, 80) +
                             "' is not an emulated IPC handle (pid:fd:offset)");
    const std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
    int local = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (local < 0)
      throw DistBackendError("emulated cuda: ipc_open of handle " + handle + ": cannot open " + path + ": " +
                             errno_text(errno) +
                             " (the peer is gone, or this host forbids opening another process's files: "
                             "/proc/sys/kernel/yama/ptrace_scope; force the staged path with TDIST_CUDA_PATH=staged)");
    struct stat st {};
    if (fstat(local, &st) != 0 || static_cast<unsigned long long>(st.st_size) <= offset) {
      ::close(local);
      throw DistBackendError("emulated cuda: ipc_open of handle " + handle + ": " + path +
                             " is not a region of that size");
    }
    const size_t length = static_cast<size_t>(st.st_size);
    void* p = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, local, 0);
    const int err = errno;
    ::close(local);  // the mapping keeps the pages
    if (p == MAP_FAILED) throw DistBackendError("emulated cuda: ipc_open of handle " + handle + ": mmap: " + errno_text(err));
    void* user = static_cast<char*>(p) + offset;
    std::lock_guard<std::mutex> lock(mu_);
    regions_[reinterpret_cast<uintptr_t>(p)] = Region{length, device, -1, user};
    return user;
  }

  void ipc_close(void* mapped) override {
    const auto at = reinterpret_cast<uintptr_t>(mapped);
    Region region;
    uintptr_t base = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = regions_.upper_bound(at);
      if (it == regions_.begin() || std::prev(it)->second.fd >= 0 || std::prev(it)->second.user != mapped)
        throw DistBackendError("emulated cuda: ipc_close of a pointer ipc_open did not return");
      --it;
      base = it->first;
      region = it->second;
      regions_.erase(it);
    }
    munmap(reinterpret_cast<void*>(base), region.bytes);
  }

 private:
  void check_device(int device, const char* what) const {
    if (device < 0 || device >= devices_)
      throw DistValueError("emulated cuda: " + std::string(what) + " on cuda:" + std::to_string(device) + ", but only " +
                           std::to_string(devices_) + " device" + (devices_ == 1 ? "" : "s") +
                           " exist (TDIST_EMULATE_CUDA=" + std::to_string(devices_) + ")");
  }

  const int devices_;
  mutable std::mutex mu_;
  std::map<uintptr_t, Region> regions_;  // by start address
};

}  // namespace

std::unique_ptr<Runtime> make_emulated_cuda_runtime(int devices) {
  if (devices <= 0) return nullptr;
  return std::make_unique<EmulatedRuntime>(devices);
}

}  // namespace tdist::device
