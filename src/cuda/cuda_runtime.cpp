// device::Runtime on the CUDA runtime API (docs/cuda_runtime.md says why each choice).
//
// The runtime is the shared libcudart (the static one's TLS breaks dlopen of libtdist); on a
// machine without a driver or a GPU every call fails cleanly, so device_count() is 0 with
// the reason. The few driver functions used (stream waits on host
// words, allocation ranges) come through cudaGetDriverEntryPointByVersion, never -lcuda.
//
// Streams are cudaStream_t and events cudaEvent_t, passed as the seam's opaque handles
// unchanged, so a caller's torch stream works as is. A null stream is the legacy default
// stream of the device the operation runs on. Calls that depend on the calling thread's
// current device run under a DeviceGuard for the device of their stream (or memory), which
// restores the thread's device afterwards.
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "cuda/cuda_check.h"
#include "util/logging.h"
#include "cuda/driver_entry_points.h"
#include "cuda/reduce_kernels.h"
#include "device/current_stream.h"
#include "device/device_runtime.h"
#include "tdist/errors.h"

namespace tdist::device {

namespace {

using cuda::DeviceGuard;
using cuda::throw_cuda_error;
using cuda::warn_cuda_error;

std::string pointer_text(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%p", p);
  return buf;
}

std::string stream_text(StreamHandle s) { return s == nullptr ? "default stream" : "stream " + pointer_text(s); }

std::string version_text(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }

// What the kernels' and the stream waits' sizing needs of a device, read once.
struct DeviceInfo {
  int multiprocessors = 1;
  bool maps_host_memory = false;  // pinned host memory has a device address
};

// IPC handles travel as text: the 64 bytes of cudaIpcMemHandle_t in hex, then ":<offset>"
// when the exported pointer lies inside its allocation rather than at its start.
std::string to_hex(const cudaIpcMemHandle_t& handle) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * sizeof(handle.reserved));
  for (char c : handle.reserved) {
    const auto b = static_cast<unsigned char>(c);
    out += kDigits[b >> 4];
    out += kDigits[b & 15];
  }
  return out;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Parses "<128 hex digits>[:<offset>]"; false when malformed.
bool parse_handle(const std::string& text, cudaIpcMemHandle_t& handle, size_t& offset) {
  constexpr size_t kDigitsLen = 2 * sizeof(handle.reserved);
  if (text.size() < kDigitsLen) return false;
  for (size_t i = 0; i < sizeof(handle.reserved); ++i) {
    const int hi = hex_digit(text[2 * i]), lo = hex_digit(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    handle.reserved[i] = static_cast<char>(hi << 4 | lo);
  }
  offset = 0;
  if (text.size() == kDigitsLen) return true;
  // At most 18 digits of offset: no overflow, and far beyond any allocation.
  if (text[kDigitsLen] != ':' || text.size() == kDigitsLen + 1 || text.size() > kDigitsLen + 1 + 18) return false;
  for (size_t i = kDigitsLen + 1; i < text.size(); ++i) {
    if (text[i] < '0' || text[i] > '9') return false;
    offset = offset * 10 + static_cast<size_t>(text[i] - '0');
  }
  return true;
}

class CudaRuntime final : public Runtime {
 public:
  CudaRuntime() {
    // Never throws: a machine without a driver or a GPU is an answer, not an error.
    int count = 0;
    if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess) {
      (void)cudaGetLastError();
      reason_ = "cudaGetDeviceCount: " + cuda::describe_error(e);
      count = 0;
    } else if (count == 0) {
      reason_ = "cudaGetDeviceCount: no CUDA device is present";
    }
    count_ = count;
    devices_.resize(static_cast<size_t>(count_));
    for (int d = 0; d < count_; ++d) {
      int sms = 0, maps = 0, unified = 0;
      if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, d) == cudaSuccess && sms > 0)
        devices_[d].multiprocessors = sms;
      if (cudaDeviceGetAttribute(&maps, cudaDevAttrCanMapHostMemory, d) == cudaSuccess &&
          cudaDeviceGetAttribute(&unified, cudaDevAttrUnifiedAddressing, d) == cudaSuccess)
        devices_[d].maps_host_memory = maps != 0 && unified != 0;
      (void)cudaGetLastError();
    }
    if (count_ > 0) driver_ = cuda::resolve_driver_entry_points();
  }

  std::string describe() const override {
    int runtime_version = 0, driver_version = 0;
    std::string text = "cuda";
    if (cudaRuntimeGetVersion(&runtime_version) == cudaSuccess) text += " " + version_text(runtime_version);
    if (cudaDriverGetVersion(&driver_version) == cudaSuccess && driver_version > 0) {
      text += ", driver " + version_text(driver_version);
    } else {
      text += ", no driver";
    }
    (void)cudaGetLastError();
    text += count_ > 0 ? " (" + std::to_string(count_) + " device" + (count_ == 1 ? ")" : "s)")
                       : " (no device: " + reason_ + ")";
    return text;
  }

  int device_count() const override { return count_; }
  std::string unavailable_reason() const override { return count_ > 0 ? std::string() : reason_; }

  int current_device() const override {
    int d = 0;
    if (cudaError_t e = cudaGetDevice(&d); e != cudaSuccess) throw_cuda_error(e, "cudaGetDevice", -1, "");
    return d;
  }

  void set_device(int index) override {
    if (cudaError_t e = cudaSetDevice(index); e != cudaSuccess)
      throw_cuda_error(e, "cudaSetDevice", index, std::to_string(count_) + " devices present");
  }

  StreamHandle current_stream(int device) const override {
    return thread_current_stream(device >= 0 ? device : count_ > 0 ? current_device() : 0);
  }

  StreamHandle create_stream(int device) override {
    require_device("create_stream", device);
    DeviceGuard guard(device);
    cudaStream_t s = nullptr;
    // Non-blocking: tdist's streams never serialise with the legacy default stream.
    if (cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking); e != cudaSuccess)
      throw_cuda_error(e, "cudaStreamCreateWithFlags", device, "non-blocking");
    return s;
  }

  void destroy_stream(StreamHandle stream) override {
    if (stream == nullptr) return;
    if (cudaError_t e = cudaStreamDestroy(static_cast<cudaStream_t>(stream)); e != cudaSuccess)
      warn_cuda_error(e, "cudaStreamDestroy", -1, stream_text(stream));
  }

  EventHandle create_event(int device) override {
    require_device("create_event", device);
    DeviceGuard guard(device);
    cudaEvent_t ev = nullptr;
    if (cudaError_t e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming); e != cudaSuccess)
      throw_cuda_error(e, "cudaEventCreateWithFlags", device, "timing disabled");
    return ev;
  }

  void destroy_event(EventHandle event) override {
    if (event == nullptr) return;
    if (cudaError_t e = cudaEventDestroy(static_cast<cudaEvent_t>(event)); e != cudaSuccess)
      warn_cuda_error(e, "cudaEventDestroy", -1, "event " + pointer_text(event));
  }

  void record(EventHandle event, StreamHandle stream) override {
    // No guard: the event and a non-null stream carry their device; the default stream is
    // the calling thread's current device's, which is where a null stream lives.
    if (cudaError_t e = cudaEventRecord(static_cast<cudaEvent_t>(event), static_cast<cudaStream_t>(stream));
        e != cudaSuccess)
      throw_cuda_error(e, "cudaEventRecord", -1, "event " + pointer_text(event) + " on " + stream_text(stream));
  }

  void stream_wait(StreamHandle stream, EventHandle event) override {
    if (cudaError_t e = cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), static_cast<cudaEvent_t>(event), 0);
        e != cudaSuccess)
      throw_cuda_error(e, "cudaStreamWaitEvent", -1, stream_text(stream) + " waits for event " + pointer_text(event));
  }

  void synchronize(EventHandle event) override {
    if (cudaError_t e = cudaEventSynchronize(static_cast<cudaEvent_t>(event)); e != cudaSuccess)
      throw_cuda_error(e, "cudaEventSynchronize", -1, "event " + pointer_text(event));
  }

  bool query(EventHandle event) override {
    const cudaError_t e = cudaEventQuery(static_cast<cudaEvent_t>(event));
    if (e == cudaSuccess) return true;
    if (e == cudaErrorNotReady) return false;
    throw_cuda_error(e, "cudaEventQuery", -1, "event " + pointer_text(event));
  }

  void synchronize_stream(StreamHandle stream) override {
    if (cudaError_t e = cudaStreamSynchronize(static_cast<cudaStream_t>(stream)); e != cudaSuccess)
      throw_cuda_error(e, "cudaStreamSynchronize", -1, stream_text(stream));
  }

  bool can_wait_on_host_word(int device) const override {
    return device >= 0 && device < count_ && driver_.stream_wait_value32 != nullptr &&
           devices_[device].maps_host_memory;
  }

  void stream_wait_host_word(StreamHandle stream, const uint32_t* word, uint32_t value) override {
    const int device = device_of_stream(stream, nullptr, nullptr);
    if (!can_wait_on_host_word(device))
      throw DistBackendError("stream_wait_host_word on cuda:" + std::to_string(device) +
                             ": this device or driver cannot make a stream wait on host memory "
                             "(cuStreamWaitValue32 " +
                             (driver_.stream_wait_value32 ? "found" : "not found in the driver") +
                             "); check can_wait_on_host_word first");
    DeviceGuard guard(device);
    bind_primary_context(device);
    // The word's device address: the same as its host address under unified addressing, but
    // asked for, as the driver's documentation requires for host memory.
    void* device_word = nullptr;
    if (cudaError_t e = cudaHostGetDevicePointer(&device_word, const_cast<uint32_t*>(word), 0); e != cudaSuccess)
      throw_cuda_error(e, "cudaHostGetDevicePointer", device,
                       "host word " + pointer_text(word) + " (must come from alloc_pinned)");
    // GEQ is the driver's cyclic comparison, (int32_t)(*word - value) >= 0: counters that
    // wrap around 2^32 keep working.
    const CUresult r = driver_.stream_wait_value32(static_cast<CUstream>(stream),
                                                   reinterpret_cast<CUdeviceptr>(device_word), value,
                                                   CU_STREAM_WAIT_VALUE_GEQ);
    if (r != CUDA_SUCCESS)
      throw DistBackendError("cuStreamWaitValue32 on cuda:" + std::to_string(device) + " (" + stream_text(stream) +
                             " waits for host word " + pointer_text(word) + " >= " + std::to_string(value) +
                             ") failed: " + driver_.describe(r));
  }

  void* alloc_device(int device, size_t bytes) override {
    require_device("alloc_device", device);
    DeviceGuard guard(device);
    void* p = nullptr;
    if (cudaError_t e = cudaMalloc(&p, bytes); e != cudaSuccess)
      throw_cuda_error(e, "cudaMalloc", device, std::to_string(bytes) + " bytes");
    return p;
  }

  void free_device(int device, void* ptr) override {
    if (ptr == nullptr) return;
    {
      // A handle of freed memory must not lead a same-process ipc_open to it.
      std::lock_guard<std::mutex> lock(ipc_mutex_);
      std::erase_if(exported_, [&](const auto& entry) { return entry.second == ptr; });
    }
    try {
      DeviceGuard guard(device);
      if (cudaError_t e = cudaFree(ptr); e != cudaSuccess)
        warn_cuda_error(e, "cudaFree", device, pointer_text(ptr));
    } catch (const DistError& e) {  // the guard: releasing never throws (warn_cuda_error says why)
      log_line(LogLevel::Warn, e.what());
    }
  }

  void* alloc_pinned(size_t bytes) override {
    if (count_ == 0)
      throw DistBackendError("alloc_pinned of " + std::to_string(bytes) + " bytes: no CUDA device: " + reason_);
    void* p = nullptr;
    // Portable: pinned for every device, not only the current one (a stage buffer may serve
    // several). Mapped: it has a device address (cudaHostGetDevicePointer), which stream
    // waits on host words need; under unified addressing that address is the host one.
    if (cudaError_t e = cudaHostAlloc(&p, bytes, cudaHostAllocPortable | cudaHostAllocMapped); e != cudaSuccess)
      throw_cuda_error(e, "cudaHostAlloc", -1, std::to_string(bytes) + " bytes of pinned host memory");
    return p;
  }

  void free_pinned(void* ptr) override {
    if (ptr == nullptr) return;
    if (cudaError_t e = cudaFreeHost(ptr); e != cudaSuccess)
      warn_cuda_error(e, "cudaFreeHost", -1, pointer_text(ptr));
  }

  void copy(void* dst, const void* src, size_t bytes, StreamHandle stream) override {
    if (bytes == 0) return;
    const int device = device_of_stream(stream, dst, src);
    DeviceGuard guard(device);
    if (cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(stream));
        e != cudaSuccess)
      throw_cuda_error(e, "cudaMemcpyAsync", device,
                       std::to_string(bytes) + " bytes from " + pointer_text(src) + " to " + pointer_text(dst) +
                           " on " + stream_text(stream));
  }

  int device_of(const void* ptr) const override {
    if (ptr == nullptr || count_ == 0) return -1;
    cudaPointerAttributes attr{};
    if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
      (void)cudaGetLastError();
      return -1;
    }
    return attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged ? attr.device : -1;
  }

  void accumulate(ReduceOp op, DType dtype, void* acc, const void* in, size_t count, StreamHandle stream) override {
    check_reduce_op(op, dtype, "accumulate on a CUDA device");
    if (count == 0) return;
    check_buffers("accumulate", count, {acc, in});
    const void* ins[2] = {acc, in};
    launch_combine("accumulate", op, dtype, acc, ins, 2, count, stream);
  }

  void combine(ReduceOp op, DType dtype, void* out, const void* const* ins, int n, size_t count,
               StreamHandle stream) override {
    check_reduce_op(op, dtype, "combine on a CUDA device");
    if (n < 1 || n > kernels::kMaxCombineInputs)
      throw DistValueError("combine on a CUDA device: " + std::to_string(n) + " inputs (1 to " +
                           std::to_string(kernels::kMaxCombineInputs) + " in one pass)");
    if (count == 0) return;
    check_buffers("combine", count, {out});
    for (int k = 0; k < n; ++k) check_buffers("combine", count, {ins[k]});
    launch_combine("combine", op, dtype, out, ins, n, count, stream);
  }

  void finalize(ReduceOp op, DType dtype, void* data, size_t count, int contributors,
                StreamHandle stream) override {
    check_reduce_op(op, dtype, "finalize on a CUDA device");
    if (op.kind() != ReduceOp::AVG && op.kind() != ReduceOp::PREMUL_SUM) return;
    if (op.kind() == ReduceOp::AVG && contributors <= 0)
      throw DistValueError("finalize on a CUDA device: AVG over " + std::to_string(contributors) +
                           " contributors (must be positive)");
    if (count == 0) return;
    check_buffers("finalize", count, {data});
    const int device = device_of_stream(stream, data, nullptr);
    DeviceGuard guard(device);
    const cudaError_t e = kernels::launch_finalize(op, dtype, data, count, contributors, max_blocks(device),
                                                   static_cast<cudaStream_t>(stream));
    if (e != cudaSuccess)
      throw_cuda_error(e, "finalize kernel launch", device,
                       std::string(op.name()) + " of " + std::to_string(count) + " " +
                           std::string(dtype_name(dtype)) + " at " + pointer_text(data) + " on " + stream_text(stream));
  }

  std::string ipc_handle(void* device_ptr) override {
    const int device = device_of(device_ptr);
    if (device < 0)
      throw DistBackendError("ipc_handle: " + pointer_text(device_ptr) + " is not CUDA device memory");
    DeviceGuard guard(device);
    bind_primary_context(device);
    void* base = device_ptr;
    if (driver_.mem_get_address_range != nullptr) {
      CUdeviceptr start = 0;
      size_t size = 0;
      const CUresult r =
          driver_.mem_get_address_range(&start, &size, reinterpret_cast<CUdeviceptr>(device_ptr));
      if (r != CUDA_SUCCESS)
        throw DistBackendError("cuMemGetAddressRange on cuda:" + std::to_string(device) + " (" +
                               pointer_text(device_ptr) + ") failed: " + driver_.describe(r));
      base = reinterpret_cast<void*>(start);
    }
    cudaIpcMemHandle_t handle{};
    if (cudaError_t e = cudaIpcGetMemHandle(&handle, base); e != cudaSuccess)
      throw_cuda_error(e, "cudaIpcGetMemHandle", device, "allocation at " + pointer_text(base));
    std::string text = to_hex(handle);
    std::lock_guard<std::mutex> lock(ipc_mutex_);
    exported_[text] = base;
    const auto offset = static_cast<size_t>(static_cast<char*>(device_ptr) - static_cast<char*>(base));
    if (offset != 0) text += ":" + std::to_string(offset);
    return text;
  }

  void* ipc_open(int device, const std::string& text) override {
    require_device("ipc_open", device);
    cudaIpcMemHandle_t handle{};
    size_t offset = 0;
    if (!parse_handle(text, handle, offset))
      throw DistBackendError("ipc_open on cuda:" + std::to_string(device) + ": malformed handle '" +
                             text.substr(0, 160) + "' (128 hex digits, then an optional :offset)");
    const std::string key = text.substr(0, 2 * sizeof(handle.reserved));
    std::lock_guard<std::mutex> lock(ipc_mutex_);
    auto it = imports_.find(key);
    if (it == imports_.end()) {
      Import import;
      if (auto exp = exported_.find(key); exp != exported_.end()) {
        // CUDA refuses to open a handle in the process that exported it: ranks that are
        // threads of one process get the exporter's own allocation instead.
        import = Import{exp->second, false, 0};
      } else {
        DeviceGuard guard(device);
        void* base = nullptr;
        // Lazy peer access: a handle from another device of this host maps through NVLink/PCIe.
        if (cudaError_t e = cudaIpcOpenMemHandle(&base, handle, cudaIpcMemLazyEnablePeerAccess); e != cudaSuccess)
          throw_cuda_error(e, "cudaIpcOpenMemHandle", device, "handle " + key.substr(0, 16) + "...");
        import = Import{base, true, 0};
      }
      it = imports_.emplace(key, import).first;
    }
    // The offset comes from a peer: one past the allocation would make kernels fault far
    // from here, so it is checked against the mapped allocation's size.
    if (offset != 0 && driver_.mem_get_address_range != nullptr) {
      bind_primary_context(device);
      CUdeviceptr start = 0;
      size_t size = 0;
      const CUresult r =
          driver_.mem_get_address_range(&start, &size, reinterpret_cast<CUdeviceptr>(it->second.base));
      if (r == CUDA_SUCCESS && offset >= size) {
        if (it->second.opens == 0) {
          if (it->second.imported) (void)cudaIpcCloseMemHandle(it->second.base);
          imports_.erase(it);
        }
        throw DistBackendError("ipc_open on cuda:" + std::to_string(device) + ": handle " + key.substr(0, 16) +
                               "... has offset " + std::to_string(offset) + " past its allocation of " +
                               std::to_string(size) + " bytes");
      }
    }
    // One mapping per allocation however often it is opened (CUDA maps a handle once per
    // process), closed when the last ipc_open of it is closed.
    ++it->second.opens;
    void* mapped = static_cast<char*>(it->second.base) + offset;
    opened_.emplace(mapped, key);
    return mapped;
  }

  void ipc_close(void* mapped) override {
    std::lock_guard<std::mutex> lock(ipc_mutex_);
    auto it = opened_.find(mapped);
    if (it == opened_.end())
      throw DistBackendError("ipc_close: " + pointer_text(mapped) + " was not returned by ipc_open");
    auto imp = imports_.find(it->second);
    opened_.erase(it);
    if (imp == imports_.end() || --imp->second.opens > 0) return;
    const Import import = imp->second;
    imports_.erase(imp);
    if (!import.imported) return;
    if (cudaError_t e = cudaIpcCloseMemHandle(import.base); e != cudaSuccess)
      warn_cuda_error(e, "cudaIpcCloseMemHandle", -1, pointer_text(import.base));
  }

 private:
  // Driver calls act on the calling thread's current context, which the runtime binds to a
  // thread only lazily; cudaSetDevice binds the device's primary context at once (CUDA 12+).
  static void bind_primary_context(int device) {
    if (cudaError_t e = cudaSetDevice(device); e != cudaSuccess)
      throw_cuda_error(e, "cudaSetDevice", device, "to bind its context for a driver call");
  }

  // A device index this runtime has, or DistBackendError naming the operation and why not.
  void require_device(const char* what, int device) const {
    if (device >= 0 && device < count_) return;
    if (count_ == 0) throw DistBackendError(std::string(what) + " on cuda:" + std::to_string(device) + ": no CUDA device: " + reason_);
    throw DistBackendError(std::string(what) + " on cuda:" + std::to_string(device) + ": no such device (" +
                           std::to_string(count_) + " present)");
  }

  struct Import {
    void* base = nullptr;   // the allocation as mapped here
    bool imported = false;  // false: this process's own allocation (nothing to close)
    int opens = 0;
  };

  // The device an operation on `stream` runs on: a stream's own; for the default stream, the
  // device of the first device buffer named, else the calling thread's current device.
  int device_of_stream(StreamHandle stream, const void* a, const void* b) const {
    if (stream != nullptr) {
      int d = 0;
      if (cudaError_t e = cudaStreamGetDevice(static_cast<cudaStream_t>(stream), &d); e != cudaSuccess)
        throw_cuda_error(e, "cudaStreamGetDevice", -1, stream_text(stream));
      return d;
    }
    for (const void* p : {a, b}) {
      if (p == nullptr) continue;
      if (const int d = device_of(p); d >= 0) return d;
    }
    return current_device();
  }

  // Enough 512-thread blocks to fill every multiprocessor (2048 threads each on sm_80/90);
  // the kernels stride over the rest.
  int max_blocks(int device) const {
    const int sms = device >= 0 && device < count_ ? devices_[device].multiprocessors : 1;
    return 4 * sms;
  }

  static void check_buffers(const char* what, size_t count, std::initializer_list<const void*> ptrs) {
    for (const void* p : ptrs)
      if (p == nullptr)
        throw DistValueError(std::string(what) + " on a CUDA device: null buffer for " + std::to_string(count) +
                             " elements");
  }

  void launch_combine(const char* what, ReduceOp op, DType dtype, void* out, const void* const* ins, int n,
                      size_t count, StreamHandle stream) {
    const int device = device_of_stream(stream, out, nullptr);
    DeviceGuard guard(device);
    const cudaError_t e =
        kernels::launch_combine(op, dtype, out, ins, n, count, max_blocks(device), static_cast<cudaStream_t>(stream));
    if (e != cudaSuccess)
      throw_cuda_error(e, (std::string(what) + " kernel launch").c_str(), device,
                       std::string(op.name()) + " of " + std::to_string(n) + " x " + std::to_string(count) + " " +
                           std::string(dtype_name(dtype)) + " into " + pointer_text(out) + " on " +
                           stream_text(stream));
  }

  int count_ = 0;
  std::string reason_;
  std::vector<DeviceInfo> devices_;
  cuda::DriverEntryPoints driver_;

  std::mutex ipc_mutex_;
  std::unordered_map<std::string, void*> exported_;     // handle digits -> own allocation
  std::unordered_map<std::string, Import> imports_;     // handle digits -> its mapping here
  std::unordered_multimap<void*, std::string> opened_;  // what ipc_open returned -> handle digits
};

}  // namespace

std::unique_ptr<Runtime> make_cuda_runtime() { return std::make_unique<CudaRuntime>(); }
bool built_with_cuda() { return true; }

}  // namespace tdist::device
