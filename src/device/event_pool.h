// Events of one runtime kept for reuse, per device: an operation on device
// tensors needs two (its issue and its end), and creating and destroying them
// per operation is a driver call each way (on a sandboxed GPU, a trip through
// the sandbox). An event handed back may still be pending: recording it again
// later is allowed, and what waited on its earlier record is unaffected.
#pragma once

#include <mutex>
#include <vector>

#include "device/device_runtime.h"

namespace tdist::device {

class EventPool {
 public:
  explicit EventPool(Runtime& runtime) : runtime_(runtime) {}
  ~EventPool();
  EventPool(const EventPool&) = delete;
  EventPool& operator=(const EventPool&) = delete;

  // A kept event of `device`, else a new one.
  EventHandle take(int device);
  // Back for reuse; it must come from take(device).
  void give(int device, EventHandle event);
  // How many are kept now (for tests).
  size_t kept() const;

 private:
  Runtime& runtime_;
  mutable std::mutex mu_;
  std::vector<std::vector<EventHandle>> free_;  // by device
};

}  // namespace tdist::device
