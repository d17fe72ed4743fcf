#include "backends/device_path/device_path.h"

#include "tdist/errors.h"
#include "util/settings.h"

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
  for (const Block& b : pool_) runtime->free_pinned(b.data);
}

device::Runtime& DevicePath::runtime(const std::string& what) {
  device::Runtime* rt = runtime_.load(std::memory_order_acquire);
  if (rt == nullptr) {
    rt = &device::require_runtime(DeviceType::CUDA, what);
    std::call_once(events_made_, [&] { events_ = std::make_unique<device::EventPool>(*rt); });
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
    // TDIST_CUDA_WAIT=HOST: no word, so DeviceWork::wait blocks the host (the registry spells the choice).
    if (rt->can_wait_on_host_word(device) && settings::get<"TDIST_CUDA_WAIT">() != "HOST") {
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
    data_ = other.data_;
    other.data_ = nullptr;
  }
  return *this;
}

void DevicePath::Lease::release() {
  if (data_ == nullptr) return;
  std::lock_guard<std::mutex> lock(owner_->mu_);
  for (Block& b : owner_->pool_)
    if (b.data == data_) b.leased = false;
  data_ = nullptr;
}

DevicePath::Block* DevicePath::free_block(size_t bytes) {
  Block* best = nullptr;
  for (Block& b : pool_)
    if (!b.leased && b.bytes >= bytes && (best == nullptr || b.bytes < best->bytes)) best = &b;
  return best;
}

DevicePath::Block DevicePath::new_block(size_t bytes) {
  // A power of two: later requests of nearby sizes find it free.
  size_t size = kMinBlockBytes;
  while (size < bytes) size *= 2;
  device::Runtime* rt = runtime_.load(std::memory_order_acquire);
  return Block{static_cast<char*>(rt->alloc_pinned(size)), size, false};
}

void DevicePath::reserve(size_t bytes) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (free_block(bytes) != nullptr) return;
  }
  // Allocated without the lock: a lease's release must never wait for an allocation.
  Block b = new_block(bytes);
  std::lock_guard<std::mutex> lock(mu_);
  pool_.push_back(b);
}

DevicePath::Lease DevicePath::scratch(size_t bytes) {
  Lease lease;
  lease.owner_ = this;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (Block* b = free_block(bytes)) {
      b->leased = true;
      lease.data_ = b->data;
      return lease;
    }
  }
  Block b = new_block(bytes);
  b.leased = true;
  lease.data_ = b.data;
  std::lock_guard<std::mutex> lock(mu_);
  pool_.push_back(b);
  return lease;
}

size_t DevicePath::pooled_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t total = 0;
  for (const Block& b : pool_) total += b.bytes;
  return total;
}

int DevicePath::leased_blocks() const {
  std::lock_guard<std::mutex> lock(mu_);
  int n = 0;
  for (const Block& b : pool_) n += b.leased ? 1 : 0;
  return n;
}

}  // namespace tdist
