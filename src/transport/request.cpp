#include "transport/request.h"

#include "util/cpu_relax.h"
#include "util/futex.h"

namespace tdist {

namespace {
// A few microseconds of spinning (docs/tuning_log.md: Transport) before
// sleeping. Only waits that do not drive the transport come
// here (a user's Work::wait with its own timeout, the end of an abort).
constexpr int kSpinIterations = 200;
}  // namespace

void Request::sleep(uint32_t seen, Deadline deadline) {
  // Announce the sleeper; if the word moved meanwhile, look again instead.
  if (!(seen & kSleeping) &&
      !state_.compare_exchange_strong(seen, seen | kSleeping, std::memory_order_acq_rel))
    return;
  auto left = deadline.is_never() ? std::chrono::nanoseconds(std::chrono::hours(24))
                                  : std::chrono::nanoseconds(deadline.at() - Clock::now());
  futex_wait(&state_, seen | kSleeping, left);
}

bool Request::wait_until(Deadline deadline) {
  for (int i = 0; i < kSpinIterations; ++i) {
    if (done()) return true;
    cpu_relax();
  }
  for (;;) {
    uint32_t s = state_.load(std::memory_order_acquire);
    if (s & kDone) return true;
    if (deadline.expired()) return false;
    sleep(s, deadline);
  }
}

bool Request::wait_done_or_poked(Deadline deadline) {
  for (;;) {
    uint32_t s = state_.load(std::memory_order_acquire);
    if (s & (kDone | kPoked)) break;
    if (deadline.expired()) break;
    sleep(s, deadline);
  }
  state_.fetch_and(~kPoked, std::memory_order_acq_rel);
  return done();
}

void Request::poke() {
  if (state_.fetch_or(kPoked, std::memory_order_acq_rel) & kSleeping) futex_wake(&state_);
}

bool Request::complete(std::exception_ptr error, int source) {
  if (claimed_.exchange(true, std::memory_order_acq_rel)) return false;
  error_ = std::move(error);
  source_ = source;
  // Before done: once done, the owner may free the request.
  if (outstanding_) outstanding_->fetch_sub(1, std::memory_order_release);
  if (state_.fetch_or(kDone, std::memory_order_acq_rel) & kSleeping) futex_wake(&state_);
  return true;
}

namespace {
struct OwnedSend {
  explicit OwnedSend(int peer, uint64_t tag, size_t size)
      : bytes(new char[size > 0 ? size : 1]), request(Request::Kind::Send, peer, tag, bytes.get(), size) {}
  std::unique_ptr<char[]> bytes;  // default-initialized: untouched until written
  Request request;
};
}  // namespace

std::shared_ptr<Request> owned_send(int peer, uint64_t tag, size_t size) {
  auto owner = std::make_shared<OwnedSend>(peer, tag, size);
  return std::shared_ptr<Request>(owner, &owner->request);
}

}  // namespace tdist
