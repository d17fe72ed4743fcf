#include "backends/device_path/device_p2p_work.h"

namespace tdist {

DeviceP2PWork::DeviceP2PWork(std::shared_ptr<Work> inner, DevicePath::Lease host, std::shared_ptr<DevicePath> path,
                             device::Runtime& runtime, int device, Tensor target)
    : inner_(std::move(inner)),
      host_(std::move(host)),
      path_(std::move(path)),
      runtime_(runtime),
      device_(device),
      target_(std::move(target)),
      landed_(path_->events().take(device)) {}

DeviceP2PWork::~DeviceP2PWork() {
  // The host buffer must outlive the transport's use of it: a send or
  // receive still in flight (never waited for) is finished or aborted first.
  if (!inner_->is_completed()) {
    try {
      inner_->wait();
    } catch (...) {
      // Its error was the caller's to see; the buffer is free either way.
    }
  }
  path_->events().give(device_, landed_);
}

void DeviceP2PWork::land() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (copied_) return;
  copied_ = true;
  if (!target_.defined() || target_.nbytes() == 0 || !inner_->is_success()) return;
  DevicePath::Streams& s = path_->streams(device_);
  runtime_.copy(target_.data(), host_.get(), target_.nbytes(), s.p2p);
  runtime_.record(landed_, s.p2p);
  runtime_.synchronize(landed_);
  landed_recorded_ = true;
}

bool DeviceP2PWork::is_completed() const {
  if (!inner_->is_completed()) return false;
  land();
  return true;
}

bool DeviceP2PWork::wait(std::chrono::milliseconds timeout) {
  inner_->wait(timeout);  // rethrows the transfer's error
  land();
  // A pooled event not recorded for this work carries an older record: nothing to wait for.
  if (landed_recorded_) runtime_.stream_wait(runtime_.current_stream(device_), landed_);
  return true;
}

}  // namespace tdist
