// What a group of the tdist backend keeps for its device tensors: per device,
// tdist's own streams and events, a pinned word a stream can wait on, and a
// cache of pinned host scratch for staging. Made on the first device
// operation of the group; every device call goes through device::Runtime.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "device/device_runtime.h"
#include "tdist/tensor.h"

namespace tdist {

// Staging's pipeline depth: host slots in flight (copy-in of chunk k+1, the
// network step of chunk k, copy-out of chunk k-1).
inline constexpr int kStageSlots = 3;

class DevicePath {
 public:
  // `label`: "rank 3 in group default_pg", for messages.
  explicit DevicePath(std::string label);
  ~DevicePath();
  DevicePath(const DevicePath&) = delete;
  DevicePath& operator=(const DevicePath&) = delete;

  // The CUDA runtime (DistBackendError naming `what` when there is none).
  device::Runtime& runtime(const std::string& what);
  // The device index of `t` (its current device for cuda without an index);
  // DistBackendError naming `op` when there is no CUDA runtime or device.
  int device_of(const Tensor& t, const char* op);

  struct Streams {
    device::StreamHandle in = nullptr;   // copies into host scratch, and single-step staging
    device::StreamHandle out = nullptr;  // copies back to the device (pipelined staging)
    device::StreamHandle p2p = nullptr;  // point-to-point staging, from any caller's thread
    std::array<device::EventHandle, kStageSlots> in_ready{};  // a slot's copy-in is done
    std::array<device::EventHandle, kStageSlots> out_done{};  // a slot's copy-out is done
    uint32_t* host_word = nullptr;  // pinned; null where streams cannot wait on host memory
  };
  // The streams of `device`, made on first use. Collectives use them from the
  // group's queue thread only; p2p from any thread (the stream alone).
  Streams& streams(int device);

  // Host memory for staging: the group's cached pinned buffer when it is free
  // and the request fits the cache's bound, else a buffer of its own for this
  // lease. Released at the lease's end.
  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& other) noexcept { *this = std::move(other); }
    Lease& operator=(Lease&& other) noexcept;
    ~Lease() { release(); }
    char* get() const { return data_; }

   private:
    friend class DevicePath;
    void release();
    DevicePath* owner_ = nullptr;
    device::Runtime* runtime_ = nullptr;
    char* data_ = nullptr;
    bool cached_ = false;
  };
  Lease scratch(size_t bytes);

  // The largest pinned buffer kept between operations.
  static constexpr size_t kCacheBytes = size_t{64} << 20;

 private:
  const std::string label_;
  // Set by the first device call (any thread; always the same runtime).
  std::atomic<device::Runtime*> runtime_{nullptr};
  std::mutex mu_;
  std::vector<std::unique_ptr<Streams>> streams_;  // by device
  char* cache_ = nullptr;
  size_t cache_bytes_ = 0;
  bool cache_busy_ = false;
};

}  // namespace tdist
