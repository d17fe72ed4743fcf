#include "device/event_pool.h"

namespace tdist::device {

EventPool::~EventPool() {
  for (auto& events : free_)
    for (EventHandle e : events) runtime_.destroy_event(e);
}

EventHandle EventPool::take(int device) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (static_cast<size_t>(device) < free_.size() && !free_[device].empty()) {
      EventHandle e = free_[device].back();
      free_[device].pop_back();
      return e;
    }
  }
  return runtime_.create_event(device);
}

void EventPool::give(int device, EventHandle event) {
  if (event == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (free_.size() <= static_cast<size_t>(device)) free_.resize(device + 1);
  free_[device].push_back(event);
}

size_t EventPool::kept() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& events : free_) n += events.size();
  return n;
}

}  // namespace tdist::device
