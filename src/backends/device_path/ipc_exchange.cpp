#include "backends/device_path/ipc_exchange.h"

#include "tdist/errors.h"
#include "util/error_context.h"

namespace tdist {

IpcExchange::IpcExchange(std::shared_ptr<Store> store, int rank, int size, std::string label)
    : store_(std::move(store)), rank_(rank), size_(size), label_(std::move(label)) {}

IpcExchange::~IpcExchange() {
  if (runtime_ == nullptr) return;
  for (int r = 0; r < size_; ++r) {
    if (mapped_[r] == nullptr) continue;
    try {
      if (r == rank_)
        runtime_->free_device(device_, mapped_[r]);
      else
        runtime_->ipc_close(mapped_[r]);
    } catch (const std::exception&) {
      // At teardown a runtime that already shut down refuses; the process's memory goes anyway.
    }
  }
}

void IpcExchange::ensure(device::Runtime& runtime, int device, const Deadline& deadline) {
  std::lock_guard<std::mutex> lock(mu_);
  if (ready_) return;
  if (failed_) std::rethrow_exception(failed_);
  try {
    set_up(runtime, device, deadline);
    ready_ = true;
  } catch (...) {
    failed_ = with_context(std::current_exception(), label_ + ": setting up the IPC exchange failed earlier: ");
    throw;
  }
}

void IpcExchange::set_up(device::Runtime& runtime, int device, const Deadline& deadline) {
  mapped_.assign(size_, nullptr);
  mapped_[rank_] = runtime.alloc_device(device, 2 * kHalfBytes);
  runtime_ = &runtime;
  device_ = device;
  const std::string prefix = "device_ipc/";
  store_->set(prefix + std::to_string(rank_), runtime.ipc_handle(mapped_[rank_]));
  std::vector<std::string> keys;
  for (int r = 0; r < size_; ++r)
    if (r != rank_) keys.push_back(prefix + std::to_string(r));
  store_->wait(keys, deadline.remaining());
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    const std::string handle = store_->get(prefix + std::to_string(r));
    try {
      mapped_[r] = runtime.ipc_open(device, handle);
    } catch (...) {
      std::rethrow_exception(with_context(std::current_exception(),
                                          "mapping the IPC exchange buffer of rank " + std::to_string(r) + ": "));
    }
  }
}

}  // namespace tdist
