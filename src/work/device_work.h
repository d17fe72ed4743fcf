// The Work of an operation on device tensors run by a CPU-driven backend (the
// tdist backend's device data paths): the operation's body runs on the
// group's queue thread and finishes this work once its results are on the
// device (the body has waited for its own device work), or it failed.
//
// What waiting guarantees (torch's semantics for CUDA tensors):
//  - synchronize() and wait() order the caller's current stream on the
//    tensors' device after the operation: work queued on that stream later
//    sees its results. Where the runtime can make a stream wait on a host
//    word, neither blocks the host: the stream waits for the word the body
//    sets when it has finished. Elsewhere (the emulated runtime) the host
//    waits until the body has finished, then the stream waits for its done
//    event (already complete then, but that keeps the order on the device).
//  - wait() rethrows the operation's error when the host has learned of it;
//    with a host word it may not have yet (as NCCL's, the error shows later,
//    in is_success()/exception() and in the next operation of the group).
//  - wait() does not make the host see the data: reading a device tensor on
//    the host needs the stream synchronised, as with torch.
#pragma once

#include <memory>

#include "device/device_runtime.h"
#include "device/event_pool.h"
#include "work/pending_work.h"

namespace tdist {

class DeviceWork final : public PendingWork {
 public:
  // `host_word`: pinned memory that the body sets to at least `ticket` when it
  // has finished, null where the runtime cannot wait on it; `events`: where its
  // two events come from and go back to. `keep` keeps both alive.
  DeviceWork(std::string op, uint64_t seq, std::shared_ptr<const std::string> label, device::Runtime& runtime,
             device::EventPool& events, int device, const uint32_t* host_word, uint32_t ticket,
             std::shared_ptr<void> keep);
  ~DeviceWork() override;

  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  void synchronize() override;

  int device() const { return device_; }
  // Recorded on the caller's current stream when the operation was issued:
  // the body's streams wait for it before touching the tensors.
  device::EventHandle issued() const { return issued_; }
  // Recorded by the body after its last device step.
  device::EventHandle done() const { return done_; }
  // Releases a stream waiting on the host word: called once the body has
  // finished (successfully or not), or will never run. The word only moves
  // forward (a late signal of an earlier ticket leaves it).
  void signal_host_word();

 private:
  device::Runtime& runtime_;
  device::EventPool& events_;
  const int device_;
  device::EventHandle issued_;
  device::EventHandle done_;
  uint32_t* host_word_;
  const uint32_t ticket_;
  std::shared_ptr<void> keep_;
};

// Signals `work`'s host word when its last copy goes: captured by the body's
// closure, it fires once the body has run, or when a stopped queue drops the
// body unrun, so that no caller's stream waits for ever.
inline std::shared_ptr<void> signal_host_word_at_end(std::shared_ptr<DeviceWork> work) {
  return std::shared_ptr<void>(nullptr, [work = std::move(work)](void*) { work->signal_host_word(); });
}

}  // namespace tdist
