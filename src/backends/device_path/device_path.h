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
#include "device/event_pool.h"
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
  // The group's events kept for reuse (made with the runtime: call runtime() first).
  device::EventPool& events() { return *events_; }
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

  // Host memory for staging: a free pinned block of the group's pool that
  // holds `bytes`, else a new block (its size a power of two) added to the
  // pool. Back in the pool at the lease's end.
  //
  // Blocks are freed only with the group: cudaFreeHost synchronizes the
  // device, so freeing while a caller's stream waits on the host word of an
  // operation this thread has yet to finish would never return (on a GPU the
  // first staging of a larger size hung so). The pool holds at most the
  // peak of pinned memory in use at once, as torch's caching host allocator.
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
    char* data_ = nullptr;
  };
  Lease scratch(size_t bytes);
  // Makes sure a free block of `bytes` is in the pool, so that the operation's
  // body (on the queue thread) allocates nothing: called on the caller's thread
  // when it issues the operation, before its stream may wait on a host word
  // (cudaHostAlloc may serialize with the device's streams).
  void reserve(size_t bytes);

  // The smallest block of the pool.
  static constexpr size_t kMinBlockBytes = size_t{4} << 10;
  // The pool's blocks, for tests: their sizes, and how many are leased.
  size_t pooled_bytes() const;
  int leased_blocks() const;

 private:
  const std::string label_;
  // Set by the first device call (any thread; always the same runtime).
  std::atomic<device::Runtime*> runtime_{nullptr};
  std::once_flag events_made_;
  std::unique_ptr<device::EventPool> events_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Streams>> streams_;  // by device
  struct Block {
    char* data = nullptr;
    size_t bytes = 0;
    bool leased = false;
  };
  std::vector<Block> pool_;
  Block* free_block(size_t bytes);  // the smallest free one that holds `bytes`, under mu_
  Block new_block(size_t bytes);    // allocated, not yet in the pool
};

}  // namespace tdist
