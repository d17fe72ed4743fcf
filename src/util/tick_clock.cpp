#include "util/tick_clock.h"

#include <algorithm>
#include <cstdint>
#include <ctime>
#include <iterator>
#include <mutex>
#include <optional>
#include <thread>

namespace tdist {

namespace tick_detail {
std::atomic<const Anchor*> g_anchor{nullptr};
}  // namespace tick_detail

namespace {

using namespace tick_detail;

int64_t clock_ns(clockid_t id) {
  timespec ts;
  clock_gettime(id, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

struct Triple {
  uint64_t ticks;
  int64_t steady_ns;
  int64_t realtime_ns;
};
// The counter and the clocks read back to back: off by a read or two (tens of
// ns). A thread preempted between the reads would pair them wrongly by the
// whole preemption, milliseconds on a loaded machine, and every time converted
// with that anchor would be off as much: the clock reads are bracketed by two
// counter reads, and the tightest of a few tries is kept.
Triple read_triple() {
  Triple best{};
  uint64_t best_span = UINT64_MAX;
  for (int i = 0; i < 4; ++i) {
    const uint64_t before = now_ticks();
    const int64_t steady = clock_ns(CLOCK_MONOTONIC), real = clock_ns(CLOCK_REALTIME);
    const uint64_t span = now_ticks() - before;
    if (span < best_span) {
      best_span = span;
      best = {before + span / 2, steady, real};
    }
  }
  return best;
}

// Taken when the library loads: the longer the interval to an anchor, the
// better the rate it measures.
const Triple g_load = read_triple();

constexpr int64_t kMinCalibrationNs = 20'000'000;
constexpr int64_t kRefreshNs = 1'000'000'000;

std::mutex g_mu;           // refreshing the anchor
Triple g_last{};           // the anchor published last (under g_mu)
double g_last_rate = 0;    // its rate (under g_mu)
// Entries are reused 64 refreshes (a minute) after they were published.
Anchor g_pool[64];
size_t g_pool_next = 0;    // under g_mu

// A fresh anchor, published; false while the process is too young to know the rate.
bool refresh_locked() {
  const Triple now = read_triple();
  const int64_t elapsed = now.steady_ns - g_load.steady_ns;
  if (elapsed < kMinCalibrationNs || now.ticks <= g_load.ticks) return false;
  // The rate comes from the steady clock (NTP steps of the system clock do
  // not bend it), over the process's life so far.
  const double rate = static_cast<double>(elapsed) / static_cast<double>(now.ticks - g_load.ticks);
  g_last = now;
  g_last_rate = rate;
  Anchor& a = g_pool[g_pool_next++ % std::size(g_pool)];
  a = Anchor{now.ticks, now.steady_ns, rate, static_cast<uint64_t>(kRefreshNs / rate)};
  g_anchor.store(&a, std::memory_order_release);
  return true;
}

}  // namespace

#if !(defined(__x86_64__) || defined(__i386__))
uint64_t now_ticks() { return static_cast<uint64_t>(clock_ns(CLOCK_MONOTONIC)); }
#endif

int64_t tick_detail::steady_ns_slow(uint64_t ticks) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!refresh_locked()) return clock_ns(CLOCK_MONOTONIC);  // young process: the clock itself, near enough
  return g_last.steady_ns + static_cast<int64_t>(static_cast<double>(static_cast<int64_t>(ticks - g_last.ticks)) *
                                                 g_last_rate);
}

int64_t realtime_us_now() { return clock_ns(CLOCK_REALTIME) / 1000; }

int64_t coarse_resolution_us() {
  static const int64_t us = [] {
    timespec ts{};
    clock_getres(CLOCK_MONOTONIC_COARSE, &ts);
    return std::max<int64_t>(1, (static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec + 999) / 1000);
  }();
  return us;
}

int64_t TickConversion::realtime_us_of_steady(int64_t steady_ns) const {
  if (steady_ns == 0) return 0;
  return (realtime_ns_ + (steady_ns - steady_ns_)) / 1000;
}

TickConversion::TickConversion() {
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(g_mu);
      if (refresh_locked()) {
        ticks_ = g_last.ticks;
        steady_ns_ = g_last.steady_ns;
        realtime_ns_ = g_last.realtime_ns;
        ns_per_tick_ = g_last_rate;
        return;
      }
    }
    // Not holding g_mu: deadlines made meanwhile read the clock instead (steady_ns_slow).
    const int64_t elapsed = clock_ns(CLOCK_MONOTONIC) - g_load.steady_ns;
    std::this_thread::sleep_for(std::chrono::nanoseconds(std::max<int64_t>(kMinCalibrationNs - elapsed, 1000000)));
  }
}

TickConversion recent_conversion() {
  static std::mutex mu;
  static std::optional<TickConversion> cached;
  static int64_t made_ns = 0;
  std::lock_guard<std::mutex> lock(mu);
  const int64_t now = clock_ns(CLOCK_MONOTONIC);
  if (!cached || now - made_ns > kRefreshNs) {
    cached.emplace();
    made_ns = now;
  }
  return *cached;
}

int64_t TickConversion::realtime_us(uint64_t ticks) const {
  if (ticks == 0) return 0;
  // Signed: a tick read on another core may precede the anchor by a little.
  const double delta = static_cast<double>(static_cast<int64_t>(ticks - ticks_)) * ns_per_tick_;
  return (realtime_ns_ + static_cast<int64_t>(delta)) / 1000;
}

}  // namespace tdist
