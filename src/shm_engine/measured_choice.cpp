#include "shm_engine/measured_choice.h"

#include <algorithm>
#include <bit>

namespace tdist::shm_engine {

size_t MeasuredChoice::class_of(size_t bytes) { return bytes == 0 ? 0 : std::bit_width(bytes) - 1; }

uint32_t MeasuredChoice::retry_every(double ratio) {
  return static_cast<uint32_t>(std::clamp(128 * ratio, 128.0, 8192.0));
}

MeasuredChoice::Pick MeasuredChoice::pick(size_t bytes) {
  Times& t = classes_[class_of(bytes)];
  if (t.burst > 0) {
    --t.burst;
    return {t.last, true};
  }
  if (t.calls < kWarmUpCalls) {
    ++t.calls;
    t.last = 0;
    return {0, false};
  }
  int want;
  if (t.runs[0] < kFirstRuns || t.runs[1] < kFirstRuns) {
    want = t.runs[1] < t.runs[0] ? 1 : 0;
  } else {
    // The other way takes over only when clearly faster: two ways within a few
    // percent would otherwise swap on noise, and each swap runs a cold call.
    if (t.ns_per_byte[1 - t.best] < kTakeOverBelow * t.ns_per_byte[t.best]) t.best = static_cast<int8_t>(1 - t.best);
    const int best = t.best;
    const double ratio = t.ns_per_byte[1 - best] / std::max(t.ns_per_byte[best], 1e-12);
    want = best;
    if (++t.since_retry >= retry_every(ratio)) {
      t.since_retry = 0;
      want = 1 - best;
    }
  }
  if (want == t.last) return {want, true};
  t.last = static_cast<int8_t>(want);
  t.burst = 1;
  return {want, false};
}

void MeasuredChoice::record(size_t bytes, int way, std::chrono::nanoseconds took) {
  Times& t = classes_[class_of(bytes)];
  const double x =
      static_cast<double>(std::max<int64_t>(took.count(), 1)) / static_cast<double>(std::max<size_t>(bytes, 1));
  double& e = t.ns_per_byte[way];
  const bool best = way == t.best;
  if (t.runs[way]++ == 0)
    e = x;
  else
    e += (std::min(x, 2 * e) - e) / (best ? 8 : 2);
}

double MeasuredChoice::estimate(size_t bytes, int way) const { return classes_[class_of(bytes)].ns_per_byte[way]; }

}  // namespace tdist::shm_engine
