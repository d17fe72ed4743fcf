// The CPU's time-stamp counter as a clock: read in a few nanoseconds where
// clock_gettime costs tens in a VM, which matters on the path of an 8-byte
// collective (docs/tracing.md). One read serves an operation's deadline and
// its flight recorder entry. Ticks become the steady clock (for deadlines)
// and the system clock (for dumps and timelines) through an anchor: a
// (ticks, steady, system) triple and the counter's rate, measured from the
// moment the library loaded and refreshed at most once a second.
#pragma once

#include <atomic>
#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

namespace tdist {

#if defined(__x86_64__) || defined(__i386__)
inline uint64_t now_ticks() { return __rdtsc(); }
#else
uint64_t now_ticks();  // CLOCK_MONOTONIC in nanoseconds (tick_clock.cpp)
#endif

namespace tick_detail {
// An anchor: the counter and the steady clock read together, and the rate.
// Published as a pointer to an entry of a small pool that is reused round
// robin, a second apart: a reader is done with its entry long before.
struct Anchor {
  uint64_t ticks;
  int64_t steady_ns;
  double ns_per_tick;
  uint64_t refresh_ticks;  // an anchor older than this many ticks is refreshed
};
extern std::atomic<const Anchor*> g_anchor;  // null until the counter's rate is known
int64_t steady_ns_slow(uint64_t ticks);
}  // namespace tick_detail

// `ticks` on the steady clock (CLOCK_MONOTONIC), in nanoseconds.
[[gnu::always_inline]] inline int64_t steady_ns_from_ticks(uint64_t ticks) {
  const tick_detail::Anchor* a = tick_detail::g_anchor.load(std::memory_order_acquire);
  // A read on another core may precede the anchor a little: then delta is huge.
  const uint64_t delta = ticks - (a ? a->ticks : 0);
  if (!a || delta > a->refresh_ticks) return tick_detail::steady_ns_slow(ticks);
  return a->steady_ns + static_cast<int64_t>(static_cast<double>(delta) * a->ns_per_tick);
}

// Ticks on the system clock (CLOCK_REALTIME), for read-outs: one conversion,
// made when it is constructed (the first may wait up to 20 ms while the
// counter's rate is measured).
class TickConversion {
 public:
  TickConversion();
  int64_t realtime_us(uint64_t ticks) const;  // 0 for 0 (not measured)
  // A reading of the steady clock (ns of CLOCK_MONOTONIC) on the system clock.
  int64_t realtime_us_of_steady(int64_t steady_ns) const;

 private:
  uint64_t ticks_;
  int64_t steady_ns_;
  int64_t realtime_ns_;
  double ns_per_tick_;
};

// A conversion made at most a second ago (for a stream of read-outs: a
// timeline's lines, observers): no wait after the first.
TickConversion recent_conversion();

// The system clock now, in microseconds since the epoch.
int64_t realtime_us_now();
// The resolution of CLOCK_MONOTONIC_COARSE (what Deadline::after_coarse reads), in µs.
int64_t coarse_resolution_us();

}  // namespace tdist
