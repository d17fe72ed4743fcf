#include "work/device_work.h"

#include <atomic>

namespace tdist {

DeviceWork::DeviceWork(std::string op, uint64_t seq, std::shared_ptr<const std::string> label,
                       device::Runtime& runtime, device::EventPool& events, int device, const uint32_t* host_word,
                       uint32_t ticket, std::shared_ptr<void> keep)
    : PendingWork(std::move(op), seq, std::move(label)),
      runtime_(runtime),
      events_(events),
      device_(device),
      issued_(events.take(device)),
      done_(events.take(device)),
      host_word_(const_cast<uint32_t*>(host_word)),
      ticket_(ticket),
      keep_(std::move(keep)) {}

DeviceWork::~DeviceWork() {
  events_.give(device_, issued_);
  events_.give(device_, done_);
}

void DeviceWork::signal_host_word() {
  if (host_word_ == nullptr) return;
  // The device reads the word on its own; the release orders the body's
  // host-side writes before it. Tickets compare as the driver's GEQ does (cyclic).
  std::atomic_ref<uint32_t> word(*host_word_);
  uint32_t now = word.load(std::memory_order_relaxed);
  while (static_cast<int32_t>(ticket_ - now) > 0 &&
         !word.compare_exchange_weak(now, ticket_, std::memory_order_release, std::memory_order_relaxed)) {
  }
}

bool DeviceWork::wait(std::chrono::milliseconds timeout) {
  if (host_word_ != nullptr) {
    if (auto e = exception()) std::rethrow_exception(e);
    runtime_.stream_wait_host_word(runtime_.current_stream(device_), host_word_, ticket_);
    return true;
  }
  PendingWork::wait(timeout);  // rethrows the operation's error
  runtime_.stream_wait(runtime_.current_stream(device_), done_);
  return true;
}

void DeviceWork::synchronize() { wait(); }

}  // namespace tdist
