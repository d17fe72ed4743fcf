#include "backends/device_path/device_path.h"

#include "tdist/errors.h"

namespace tdist {

DevicePath::DevicePath(std::string label) : label_(std::move(label)) {}

DevicePath::~DevicePath() {
  device::Runtime* runtime = runtime_.load();
  if (runtime == nullptr) return;
  for (auto& s : streams_) {
    if (!s) continue;
    for (auto* stream : {s->in, s->out, s->p2p}) runtime->destroy_stream(stream);
    for (auto* event : s->in_ready) runtime->destroy_event(event);
    for (auto* event : s->out_done) runtime->destroy_event(event);
    if (s->host_word) runtime->free_pinned(s->host_word);
  }
  if (cache_) runtime->free_pinned(cache_);
}

device::Runtime& DevicePath::runtime(const std::string& what) {
  device::Runtime* rt = runtime_.load(std::memory_order_acquire);
  if (rt == nullptr) {
    rt = &device::require_runtime(DeviceType::CUDA, what);
    runtime_.store(rt, std::memory_order_release);
  }
  return *rt;
}

int DevicePath::device_of(const Tensor& t, const char* op) {
  auto& rt = runtime(label_ + ": " + op + " of " + t.str());
  // The front has checked that the device exists, holds the memory, and is the
  // device of every tensor of the call (process_group/validate.cpp).
  return t.device().index < 0 ? rt.current_device() : t.device().index;
}

DevicePath::Streams& DevicePath::streams(int device) {
  std::lock_guard<std::mutex> lock(mu_);
  if (streams_.size() <= static_cast<size_t>(device)) streams_.resize(device + 1);
  auto& slot = streams_[device];
  if (!slot) {
    device::Runtime* rt = runtime_.load(std::memory_order_acquire);
    auto s = std::make_unique<Streams>();
    s->in = rt->create_stream(device);
    s->out = rt->create_stream(device);
    s->p2p = rt->create_stream(device);
    for (auto& e : s->in_ready) e = rt->create_event(device);
    for (auto& e : s->out_done) e = rt->create_event(device);
    if (rt->can_wait_on_host_word(device)) {
      s->host_word = static_cast<uint32_t*>(rt->alloc_pinned(sizeof(uint32_t)));
      *s->host_word = 0;
    }
    slot = std::move(s);
  }
  return *slot;
}

DevicePath::Lease& DevicePath::Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    release();
    owner_ = other.owner_;
    runtime_ = other.runtime_;
    data_ = other.data_;
    cached_ = other.cached_;
    other.data_ = nullptr;
  }
  return *this;
}

void DevicePath::Lease::release() {
  if (data_ == nullptr) return;
  if (cached_) {
    std::lock_guard<std::mutex> lock(owner_->mu_);
    owner_->cache_busy_ = false;
  } else {
    runtime_->free_pinned(data_);
  }
  data_ = nullptr;
}

DevicePath::Lease DevicePath::scratch(size_t bytes) {
  device::Runtime* rt = runtime_.load(std::memory_order_acquire);
  Lease lease;
  lease.owner_ = this;
  lease.runtime_ = rt;
  bytes = std::max<size_t>(bytes, 64);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!cache_busy_ && bytes <= kCacheBytes) {
      if (cache_bytes_ < bytes) {
        // Grown to the largest request seen (bounded): pinning is slow, so
        // the buffer stays for the group's next operations.
        if (cache_) rt->free_pinned(cache_);
        cache_ = nullptr;
        cache_bytes_ = 0;
        cache_ = static_cast<char*>(rt->alloc_pinned(bytes));
        cache_bytes_ = bytes;
      }
      cache_busy_ = true;
      lease.data_ = cache_;
      lease.cached_ = true;
      return lease;
    }
  }
  lease.data_ = static_cast<char*>(rt->alloc_pinned(bytes));
  return lease;
}

}  // namespace tdist
