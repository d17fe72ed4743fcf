// Point-to-point on a device tensor, staged: a send copies the tensor into
// pinned host memory when it is issued (after the caller's stream work queued
// before it) and sends that; a receive lands in host memory and is copied to
// the device when the caller first learns it is complete (is_completed() true,
// or wait()). The transport's request and its Work are the CPU ones.
#pragma once

#include <memory>
#include <mutex>

#include "backends/device_path/device_path.h"
#include "tdist/work.h"

namespace tdist {

class DeviceP2PWork final : public Work {
 public:
  // `target`: the device tensor a receive fills (an undefined Tensor for a send).
  DeviceP2PWork(std::shared_ptr<Work> inner, DevicePath::Lease host, std::shared_ptr<DevicePath> path,
                device::Runtime& runtime, int device, Tensor target);
  ~DeviceP2PWork() override;

  bool is_completed() const override;
  bool is_success() const override { return is_completed() && inner_->is_success(); }
  std::exception_ptr exception() const override { return inner_->exception(); }
  // The host waits for the transfer, then the caller's current stream waits
  // for the copy to the device (a receive).
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  void synchronize() override { wait(); }
  int source_rank() const override { return inner_->source_rank(); }
  std::shared_ptr<Future> get_future() override { return inner_->get_future(); }
  const std::vector<Tensor>& result() const override { return inner_->result(); }
  const std::string& op_name() const override { return inner_->op_name(); }
  uint64_t sequence_number() const override { return inner_->sequence_number(); }

 private:
  // Copies a completed receive to the device, once.
  void land() const;

  std::shared_ptr<Work> inner_;
  DevicePath::Lease host_;
  std::shared_ptr<DevicePath> path_;
  device::Runtime& runtime_;
  const int device_;
  const Tensor target_;
  device::EventHandle landed_;
  mutable std::mutex mu_;
  mutable bool copied_ = false;
  mutable bool landed_recorded_ = false;  // land() recorded landed_ (set under mu_, before wait reads it)
};

}  // namespace tdist
