// Deadlines for every blocking wait: nothing in tdist waits without one.
#pragma once

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdint>
#include <ctime>
#include <string>

#include "util/tick_clock.h"

namespace tdist {

using Clock = std::chrono::steady_clock;
using Millis = std::chrono::milliseconds;

class Deadline {
 public:
  static Deadline after(Millis timeout) { return Deadline(Clock::now() + timeout, timeout); }
  // For an operation's timeout (seconds to minutes): the coarse clock (a few
  // ms of resolution, read without the time-stamp counter) is exact enough,
  // and Clock::now() costs tens of ns in a VM, a tenth of a small
  // shared-memory collective. The deadline may fall up to one tick early.
  static Deadline after_coarse(Millis timeout) {
    int64_t unused;
    return after_coarse(timeout, unused);
  }
  // The same, saying what the coarse clock read (ns of CLOCK_MONOTONIC).
  static Deadline after_coarse(Millis timeout, int64_t& now_ns) {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);  // Clock (steady_clock) counts CLOCK_MONOTONIC
    now_ns = static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
    return Deadline(Clock::time_point(std::chrono::nanoseconds(now_ns)) + timeout, timeout);
  }
  // From a time-stamp counter reading the caller has (util/tick_clock.h):
  // exact, and cheaper than either clock.
  static Deadline after_ticks(uint64_t ticks, Millis timeout) {
    return Deadline(Clock::time_point(std::chrono::nanoseconds(steady_ns_from_ticks(ticks))) + timeout, timeout);
  }
  static Deadline never() { return Deadline(Clock::time_point::max(), Millis::max()); }

  bool is_never() const { return at_ == Clock::time_point::max(); }
  bool expired() const { return !is_never() && Clock::now() >= at_; }
  Clock::time_point at() const { return at_; }
  // The timeout this deadline was made from, for error messages.
  Millis timeout() const { return timeout_; }
  Millis remaining() const {
    if (is_never()) return Millis::max();
    auto left = std::chrono::duration_cast<Millis>(at_ - Clock::now());
    return std::max(left, Millis(0));
  }
  // For poll/epoll_wait: -1 when never, else ms left (rounded up, capped).
  int poll_ms() const {
    if (is_never()) return -1;
    auto left = std::chrono::duration_cast<std::chrono::microseconds>(at_ - Clock::now()).count();
    if (left <= 0) return 0;
    return static_cast<int>(std::min<long long>((left + 999) / 1000, INT_MAX));
  }
  Deadline earlier(const Deadline& o) const { return o.at_ < at_ ? o : *this; }
  // This deadline `by` sooner (its timeout as much shorter); never stays never.
  Deadline sooner(Millis by) const {
    if (is_never()) return *this;
    by = std::min(by, timeout_);
    return Deadline(at_ - by, timeout_ - by);
  }

 private:
  Deadline(Clock::time_point at, Millis timeout) : at_(at), timeout_(timeout) {}
  Clock::time_point at_;
  Millis timeout_;
};

inline std::string format_ms(Millis ms) {
  if (ms == Millis::max()) return "no timeout";
  return std::to_string(ms.count()) + " ms";
}

}  // namespace tdist
