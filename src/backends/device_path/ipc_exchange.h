// The same-host IPC path's shared memory: each rank of a group allocates one
// exchange buffer on its device (once per group, at the group's first IPC
// collective, which every rank reaches in the same order), publishes its IPC
// handle in the group's store, and maps every peer's. The buffer has two
// halves used by alternate chunks (counted across operations), so that a rank
// fills one half while its peers may still read the other: with that, a
// chunk needs one host barrier after the inputs are in place (and all_reduce
// a second one after the reduced slices are), never one before reuse.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "device/device_runtime.h"
#include "tdist/store.h"
#include "util/deadline.h"

namespace tdist {

class IpcExchange {
 public:
  // Each half of a rank's exchange buffer: the largest chunk of one IPC step.
  static constexpr size_t kHalfBytes = size_t{4} << 20;

  IpcExchange(std::shared_ptr<Store> store, int rank, int size, std::string label);
  ~IpcExchange();
  IpcExchange(const IpcExchange&) = delete;
  IpcExchange& operator=(const IpcExchange&) = delete;

  // Sets the buffers up on first use (a collective every rank makes), on the
  // caller's thread when it issues that collective, before its stream can wait
  // on an operation's host word: cudaMalloc may serialize with the device's
  // streams, and the queue thread that sets the word must never wait for them.
  // A setup that failed fails every later call with the same error.
  void ensure(device::Runtime& runtime, int device, const Deadline& deadline);
  // Rank r's half h, mapped here (this rank's own buffer for r == rank).
  char* half(int r, int h) const { return static_cast<char*>(mapped_[r]) + static_cast<size_t>(h) * kHalfBytes; }
  // The half the next chunk uses (alternating, alike on every rank).
  int next_half() { return static_cast<int>(chunks_++ % 2); }

 private:
  void set_up(device::Runtime& runtime, int device, const Deadline& deadline);

  std::shared_ptr<Store> store_;
  const int rank_, size_;
  const std::string label_;
  std::mutex mu_;
  std::exception_ptr failed_;
  bool ready_ = false;
  device::Runtime* runtime_ = nullptr;  // set once the own buffer is allocated (the destructor frees it)
  int device_ = -1;
  std::vector<void*> mapped_;  // by rank
  uint64_t chunks_ = 0;
};

}  // namespace tdist
