// "cuda" devices emulated in host memory (TDIST_EMULATE_CUDA=N): the data
// paths of CUDA tensors run their real logic (staging, IPC exchange, the
// kernels' callers, stream and event ordering calls) on machines without a GPU.
//
// What is emulated and how:
//  - device memory is a memfd mapped shared, so a peer process on this host
//    can map the same pages, as cudaIpcOpenMemHandle maps a peer's allocation;
//    the handle is "<pid>:<fd>:<offset>" and the peer opens /proc/<pid>/fd/<fd>
//    (allowed between processes of one user unless ptrace is restricted);
//  - every operation "on a stream" runs on the calling thread when it is
//    called, once the stream's pending host-word waits are met (below);
//  - the kernels are tdist::reduction's CPU kernels;
//  - device_of answers from a table of the allocations and mappings made here.
//
// Host-word waits (stream_wait_host_word), as a GPU has them: the wait is
// pending on the stream until the word reaches its value; an event recorded
// on the stream carries the stream's pending waits, and a stream made to wait
// for that event takes them on. Work on a stream, and waiting for an event or
// a stream, first waits until those words are set. free_pinned and
// free_device synchronize the device, as cudaFreeHost and cudaFree do: they
// wait until every stream's pending waits are met. A wait a GPU would keep
// for ever (the thread that sets the word is the one waiting) ends here after
// the runtime's patience (60 s unless a test sets it) with an error that says
// so, instead of a hang.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "device/current_stream.h"
#include "device/device_runtime.h"
#include "reduce/reduction_kernels.h"
#include "tdist/errors.h"

namespace tdist::device {

namespace {

thread_local int current_device_index = 0;

// A stream's wait for `*word` to reach `value` (the driver's cyclic comparison).
struct HostWordWait {
  const uint32_t* word;
  uint32_t value;
  bool met() const { return static_cast<int32_t>(__atomic_load_n(word, __ATOMIC_ACQUIRE) - value) >= 0; }
};
using Waits = std::vector<HostWordWait>;

// Adds `w` to `waits`, keeping one wait per word (the later value) and dropping those met.
void add_wait(Waits& waits, HostWordWait w) {
  for (HostWordWait& x : waits)
    if (x.word == w.word) {
      if (static_cast<int32_t>(w.value - x.value) > 0) x.value = w.value;
      w.word = nullptr;
    }
  if (w.word != nullptr) waits.push_back(w);
  std::erase_if(waits, [](const HostWordWait& x) { return x.met(); });
}

struct EmulatedStream {
  int device;
  Waits waits;
};
struct EmulatedEvent {
  int device;
  Waits waits;
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
  EmulatedRuntime(int devices, std::chrono::milliseconds patience) : devices_(devices), patience_(patience) {}

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
    auto* s = new EmulatedStream{device, {}};
    std::lock_guard<std::mutex> lock(mu_);
    streams_.insert(s);
    return s;
  }
  void destroy_stream(StreamHandle stream) override {
    std::lock_guard<std::mutex> lock(mu_);
    streams_.erase(static_cast<EmulatedStream*>(stream));
    delete static_cast<EmulatedStream*>(stream);
  }
  EventHandle create_event(int device) override {
    check_device(device, "create_event");
    return new EmulatedEvent{device, {}};
  }
  void destroy_event(EventHandle event) override { delete static_cast<EmulatedEvent*>(event); }
  // Work recorded before has run, except what waits on host words: the event takes those on.
  void record(EventHandle event, StreamHandle stream) override {
    std::lock_guard<std::mutex> lock(mu_);
    Waits& to = static_cast<EmulatedEvent*>(event)->waits;
    to.clear();
    for (const HostWordWait& w : waits_of(stream)) add_wait(to, w);
  }
  void stream_wait(StreamHandle stream, EventHandle event) override {
    std::lock_guard<std::mutex> lock(mu_);
    Waits& to = waits_of(stream);
    for (const HostWordWait& w : static_cast<EmulatedEvent*>(event)->waits) add_wait(to, w);
  }
  void synchronize(EventHandle event) override {
    meet([event](EmulatedRuntime&) -> Waits& { return static_cast<EmulatedEvent*>(event)->waits; }, "synchronize");
  }
  bool query(EventHandle event) override {
    std::lock_guard<std::mutex> lock(mu_);
    Waits& waits = static_cast<EmulatedEvent*>(event)->waits;
    std::erase_if(waits, [](const HostWordWait& w) { return w.met(); });
    return waits.empty();
  }
  void synchronize_stream(StreamHandle stream) override { before_work(stream, "synchronize_stream"); }
  bool can_wait_on_host_word(int) const override { return true; }
  void stream_wait_host_word(StreamHandle stream, const uint32_t* word, uint32_t value) override {
    std::lock_guard<std::mutex> lock(mu_);
    add_wait(waits_of(stream), HostWordWait{word, value});
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
    synchronize_device("free_device (cudaFree synchronizes the device)");
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
  void free_pinned(void* ptr) override {
    if (ptr == nullptr) return;
    synchronize_device("free_pinned (cudaFreeHost synchronizes the device)");
    std::free(ptr);
  }

  void copy(void* dst, const void* src, size_t bytes, StreamHandle stream) override {
    before_work(stream, "copy");
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

  void accumulate(ReduceOp op, DType dtype, void* acc, const void* in, size_t count, StreamHandle stream) override {
    before_work(stream, "accumulate");
    if (count != 0) reduction::accumulate(op, dtype, acc, in, count);
  }

  void combine(ReduceOp op, DType dtype, void* out, const void* const* ins, int n, size_t count,
               StreamHandle stream) override {
    before_work(stream, "combine");
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

  void finalize(ReduceOp op, DType dtype, void* data, size_t count, int contributors, StreamHandle stream) override {
    before_work(stream, "finalize");
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
  // The pending waits of `stream` (the null handle: the current device's default stream), under mu_.
  Waits& waits_of(StreamHandle stream) {
    if (stream != nullptr) return static_cast<EmulatedStream*>(stream)->waits;
    return default_waits_[current_device_index];
  }

  // Waits until every wait of the list `get` returns is met; after patience_, an error naming
  // `what`, the word and the values.
  template <typename Get>
  void meet(Get get, const std::string& what) {
    const auto give_up = std::chrono::steady_clock::now() + patience_;
    for (int polls = 0;; ++polls) {
      HostWordWait pending{};
      {
        std::lock_guard<std::mutex> lock(mu_);
        Waits& waits = get(*this);
        std::erase_if(waits, [](const HostWordWait& w) { return w.met(); });
        if (waits.empty()) return;
        pending = waits.front();
      }
      if (std::chrono::steady_clock::now() > give_up)
        throw DistBackendError(
            "emulated cuda: " + what + " waited " + std::to_string(patience_.count()) +
            " ms for a stream's wait on host word " + std::to_string(reinterpret_cast<uintptr_t>(pending.word)) +
            " to reach " + std::to_string(pending.value) + " (it holds " +
            std::to_string(__atomic_load_n(pending.word, __ATOMIC_ACQUIRE)) +
            "); on a GPU this would wait for ever (the word is set by this thread, or never)");
      if (polls < 64)
        std::this_thread::yield();
      else
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }

  // Before work on `stream` runs: its pending waits are met.
  void before_work(StreamHandle stream, const char* what) {
    meet([stream](EmulatedRuntime& self) -> Waits& { return self.waits_of(stream); }, what);
  }

  // What synchronizes the device: every stream's pending waits are met.
  void synchronize_device(const std::string& what) {
    meet([](EmulatedRuntime& self) -> Waits& { return self.gather_all_waits(); }, what);
  }

  // Every stream's pending waits in one list (under mu_); those met leave their streams' lists too.
  Waits& gather_all_waits() {
    auto met = [](const HostWordWait& w) { return w.met(); };
    all_waits_.clear();
    for (auto& [device, waits] : default_waits_) {
      std::erase_if(waits, met);
      all_waits_.insert(all_waits_.end(), waits.begin(), waits.end());
    }
    for (EmulatedStream* s : streams_) {
      std::erase_if(s->waits, met);
      all_waits_.insert(all_waits_.end(), s->waits.begin(), s->waits.end());
    }
    return all_waits_;
  }

  void check_device(int device, const char* what) const {
    if (device < 0 || device >= devices_)
      throw DistValueError("emulated cuda: " + std::string(what) + " on cuda:" + std::to_string(device) + ", but only " +
                           std::to_string(devices_) + " device" + (devices_ == 1 ? "" : "s") +
                           " exist (TDIST_EMULATE_CUDA=" + std::to_string(devices_) + ")");
  }

  const int devices_;
  const std::chrono::milliseconds patience_;
  mutable std::mutex mu_;
  std::map<uintptr_t, Region> regions_;  // by start address
  std::set<EmulatedStream*> streams_;   // those made by create_stream and not destroyed
  std::map<int, Waits> default_waits_;  // the default stream's, by device
  Waits all_waits_;                     // synchronize_device's gathering
};

}  // namespace

std::unique_ptr<Runtime> make_emulated_cuda_runtime(int devices, std::chrono::milliseconds patience) {
  if (devices <= 0) return nullptr;
  return std::make_unique<EmulatedRuntime>(devices, patience);
}

}  // namespace tdist::device
