// The staged data path of device tensors: an operation's device tensors are
// copied into pinned host scratch, the CPU collective (the group's engines and
// algorithms, unchanged) runs on the host copies, and the outputs are copied
// back. It serves any group, across hosts too. all_reduce, broadcast and
// reduce of more than one chunk are pipelined: while the network step runs on
// chunk k, chunk k+1 is copied in and chunk k-1 copied out, on two streams.
//
// Both run on the group's queue thread, inside the operation's body: they
// wait (on the device) for the caller's stream as it was at issue, and return
// once the results are on the device (the host waits for its own copies, so
// the scratch can be reused by the next operation).
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <tuple>
#include <type_traits>
#include <vector>

#include "algorithms/collective.h"
#include "algorithms/tags.h"
#include "backends/device_path/device_path.h"
#include "work/device_work.h"

namespace tdist::staging {

// The chunk of pipelined staging (all_reduce, broadcast, reduce).
inline constexpr size_t kChunkBytes = size_t{2} << 20;

// The device tensors among an operation's arguments, in argument order.
inline void collect(std::vector<Tensor>& out, const Tensor& t) {
  if (!t.is_cpu()) out.push_back(t);
}
inline void collect(std::vector<Tensor>& out, const std::vector<Tensor>& list) {
  for (const Tensor& t : list) collect(out, t);
}
template <typename T>
void collect(std::vector<Tensor>&, const T&) {}

// The first device tensor among the arguments, or null (a CPU operation:
// every tensor of a call is on one device type, the front checked).
inline const Tensor* first_device_tensor() { return nullptr; }
template <typename First, typename... Rest>
const Tensor* first_device_tensor(const First& first, const Rest&... rest) {
  if constexpr (std::is_same_v<First, Tensor>) {
    if (!first.is_cpu()) return &first;
  } else if constexpr (std::is_same_v<First, std::vector<Tensor>>) {
    for (const Tensor& t : first)
      if (!t.is_cpu()) return &t;
  }
  return first_device_tensor(rest...);
}

// Whether the arguments hold exactly one tensor and no list of them (the
// operations staging may cut into chunks).
template <typename... Args>
inline constexpr bool kOneTensor = (std::is_same_v<Args, Tensor> + ... + 0) == 1 &&
                                   (std::is_same_v<Args, std::vector<Tensor>> + ... + 0) == 0;

// The arguments with each device tensor replaced by its host copy, in the
// order collect() listed them.
class Mirrors {
 public:
  explicit Mirrors(const std::vector<Tensor>& host) : host_(host) {}
  Tensor map(const Tensor& t) { return t.is_cpu() ? t : host_[next_++]; }
  std::vector<Tensor> map(const std::vector<Tensor>& list) {
    std::vector<Tensor> out;
    out.reserve(list.size());
    for (const Tensor& t : list) out.push_back(map(t));
    return out;
  }
  template <typename T>
  const T& map(const T& value) {
    return value;
  }

 private:
  const std::vector<Tensor>& host_;
  size_t next_ = 0;
};

// Whether t's memory lies inside one of `results` (it is written by the operation).
inline bool is_output(const Tensor& t, std::span<const Tensor> results) {
  const char* begin = static_cast<const char*>(t.data());
  for (const Tensor& r : results) {
    const char* rb = static_cast<const char*>(r.data());
    if (begin >= rb && begin + t.nbytes() <= rb + r.nbytes()) return true;
  }
  return false;
}

inline size_t aligned(size_t bytes) { return (bytes + 63) / 64 * 64; }

// The number of chunks pipelined staging cuts `bytes` into (1: none).
inline size_t chunks_of(size_t bytes) { return bytes <= kChunkBytes ? 1 : (bytes + kChunkBytes - 1) / kChunkBytes; }

// The host bytes run_staged gives the device tensors among an argument (each 64-byte aligned).
inline size_t staged_bytes(const Tensor& t) { return t.is_cpu() ? 0 : aligned(t.nbytes()); }
inline size_t staged_bytes(const std::vector<Tensor>& list) {
  size_t total = 0;
  for (const Tensor& t : list) total += staged_bytes(t);
  return total;
}
template <typename T>
size_t staged_bytes(const T&) {
  return 0;
}

// The host scratch run_staged (chunks == 1) or run_staged_in_chunks takes for these arguments.
template <typename... Args>
size_t scratch_bytes(size_t chunks, const Args&... args) {
  if (chunks > 1) return kStageSlots * kChunkBytes;
  return (staged_bytes(args) + ... + size_t{0});
}

// body(ctx, args...) with every device tensor replaced by a host copy; the
// copies of tensors inside `results` go back to the device.
template <typename Body, typename... Args>
void run_staged(DevicePath& path, DeviceWork& work, CollectiveContext& ctx, std::span<const Tensor> results,
                const Body& body, const Args&... args) {
  device::Runtime& rt = path.runtime("staging");
  const int device = work.device();
  DevicePath::Streams& s = path.streams(device);
  rt.set_device(device);
  rt.stream_wait(s.in, work.issued());

  std::vector<Tensor> on_device;
  (collect(on_device, args), ...);
  DevicePath::Lease scratch = path.scratch(scratch_bytes(1, args...));
  std::vector<Tensor> on_host;
  on_host.reserve(on_device.size());
  size_t at = 0;
  for (const Tensor& t : on_device) {
    on_host.emplace_back(scratch.get() + at, t.dtype(), t.shape());
    rt.copy(scratch.get() + at, t.data(), t.nbytes(), s.in);
    at += aligned(t.nbytes());
  }
  rt.record(s.in_ready[0], s.in);
  rt.synchronize(s.in_ready[0]);

  Mirrors mirrors(on_host);
  std::tuple<decltype(mirrors.map(args))...> mapped{mirrors.map(args)...};  // braces: in order
  std::apply([&](const auto&... a) { body(ctx, a...); }, mapped);

  for (size_t i = 0; i < on_device.size(); ++i)
    if (is_output(on_device[i], results)) rt.copy(on_device[i].data(), on_host[i].data(), on_device[i].nbytes(), s.in);
  rt.record(work.done(), s.in);
  rt.synchronize(work.done());
}

// The same for an operation of one tensor that works element by element
// (all_reduce, broadcast, reduce), chunk by chunk: chunk k is the collective
// of sequence number first + k (the issuer took chunks_of() numbers).
template <typename Body, typename... Args>
void run_staged_in_chunks(DevicePath& path, DeviceWork& work, CollectiveContext& ctx, OpCode code, const Body& body,
                          const Args&... args) {
  device::Runtime& rt = path.runtime("staging");
  const int device = work.device();
  DevicePath::Streams& s = path.streams(device);
  rt.set_device(device);
  rt.stream_wait(s.in, work.issued());
  rt.stream_wait(s.out, work.issued());

  const Tensor& t = *first_device_tensor(args...);
  const size_t element = t.element_size();
  const size_t per_chunk = kChunkBytes / element;
  const size_t count = static_cast<size_t>(t.numel());
  const size_t chunks = (count + per_chunk - 1) / per_chunk;
  DevicePath::Lease scratch = path.scratch(kStageSlots * kChunkBytes);
  char* const device_bytes = static_cast<char*>(t.data());
  auto slot = [&](size_t k) { return scratch.get() + (k % kStageSlots) * kChunkBytes; };
  auto length = [&](size_t k) { return std::min(per_chunk, count - k * per_chunk); };

  auto copy_in = [&](size_t k) {
    // The slot's previous chunk (k - kStageSlots) must have left it.
    if (k >= static_cast<size_t>(kStageSlots)) rt.synchronize(s.out_done[k % kStageSlots]);
    rt.copy(slot(k), device_bytes + k * per_chunk * element, length(k) * element, s.in);
    rt.record(s.in_ready[k % kStageSlots], s.in);
  };

  const uint64_t first = sequence_of(ctx.tag);
  const uint16_t signature = signature_of(ctx.tag);
  copy_in(0);
  for (size_t k = 0; k < chunks; ++k) {
    if (k + 1 < chunks) copy_in(k + 1);
    rt.synchronize(s.in_ready[k % kStageSlots]);
    CollectiveContext sub{ctx.transport, collective_tag(code, first + k, signature), ctx.deadline, ctx.forced,
                          ctx.placement};
    sub.patient = ctx.patient;
    const std::vector<Tensor> host{Tensor(slot(k), t.dtype(), {static_cast<int64_t>(length(k))})};
    Mirrors mirrors(host);
    std::tuple<decltype(mirrors.map(args))...> mapped{mirrors.map(args)...};
    std::apply([&](const auto&... a) { body(sub, a...); }, mapped);
    rt.copy(device_bytes + k * per_chunk * element, slot(k), length(k) * element, s.out);
    rt.record(s.out_done[k % kStageSlots], s.out);
  }
  rt.record(work.done(), s.out);
  rt.synchronize(work.done());
}

}  // namespace tdist::staging
