// Which of two ways to run an operation, chosen by how long each took here.
//
// Some choices turn on where the ranks run rather than on sizes. Where two
// cores share no cache (chiplets, sockets), reading what the other core just
// wrote costs 5-10x more than where they share one, so on 2 ranks an
// all_reduce that folds in place what the other rank streamed to memory is
// 4-6x faster than shared folding there and 1.2-1.5x slower where the cores
// share a cache; all_gather's and all_to_all's large blocks, read in one copy
// or through the segment, the same way round. And where a process runs can
// change while it runs (a VM's vCPUs, a scheduler moving it). So the rank that
// decides times both ways and runs the faster, trying the other now and then,
// per size class (a power of two). Its pick travels to the other ranks inside
// the operation (HostSegment::propose); this only keeps the times.
// docs/tuning_log.md: "Ways picked by timing both".
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>

namespace tdist::shm_engine {

class MeasuredChoice {
 public:
  // The first calls of a size class go way 0 and do not count: the first
  // calls of a process's buffers took up to twice as long as later ones, more
  // so in one way than the other.
  static constexpr uint32_t kWarmUpCalls = 8;
  // Then each way is timed this often, in turn, before the times decide (each
  // time after a call that is not counted: see pick()).
  static constexpr uint32_t kFirstRuns = 1;
  // Then the slower way runs once in retry_every(its time / the faster's)
  // calls: 128 x that ratio, so that retrying costs about 1/64 of the time
  // however slow it is, and a change of place shows within a few hundred
  // calls (at most 8192).
  static uint32_t retry_every(double ratio);
  // The slower way takes over when its estimate falls below this share of the
  // faster's.
  static constexpr double kTakeOverBelow = 0.95;

  // The way (0 or 1) the next call of `bytes` runs, and whether its time
  // counts: not when the way differs from the last call's (a way's first call
  // after the other's took up to 4x its usual time: caches, the kernel's page
  // tables), and then the next call goes the same way and counts.
  struct Pick {
    int way = 0;
    bool counts = false;
  };
  Pick pick(size_t bytes);
  // A call of `bytes` whose pick counts ran `way` and took `took`. The
  // estimate moves an eighth of the way to it for the way that runs (nearly
  // every call), half for the other (which runs rarely), counting at
  // most twice the estimate: one preempted call does not condemn a way, and
  // one that became 5x slower loses to one 1.4x faster within three calls.
  void record(size_t bytes, int way, std::chrono::nanoseconds took);
  // The estimate of `way` for calls of `bytes`, in ns per byte (0: no run yet).
  double estimate(size_t bytes, int way) const;

 private:
  struct Times {
    double ns_per_byte[2] = {0, 0};
    uint32_t runs[2] = {0, 0};
    uint32_t since_retry = 0;
    uint32_t calls = 0;  // up to kWarmUpCalls
    int8_t best = 0;     // the way that runs but for retries
    int8_t last = -1;    // the way of the last pick
    uint8_t burst = 0;   // picks left that go the last way whatever the times
  };
  static size_t class_of(size_t bytes);
  std::array<Times, 64> classes_{};
};

// A choice that one rank (rank 0 of a group) makes and every rank follows:
// always one way, as a setting says, or by timing both (AUTO). A call's time
// is the longest any rank took for its part (from the round in which the pick
// arrived to its own end), which rank 0 learns at the next call
// (HostSegment::propose, picked): its own end alone would leave out what the
// others still do after it (the last copy out of the segment, say), and make
// one way look faster than it is.
struct RankZeroChoice {
  static constexpr int kTimed = -1;
  int told = kTimed;  // 0 or 1: that way always
  MeasuredChoice times;
  // On rank 0, the timed call under way: its size and pick.
  size_t bytes = 0;
  MeasuredChoice::Pick now;
  // What every rank learnt of the call under way (HostSegment::picked).
  struct Picked {
    int way = 0;
    bool timed = false;  // by timing: every rank times its part (TimedWay)
  };
  // The last call this rank timed (TimedWay): how long its part took (0: none,
  // or it failed) and, on rank 0, its size and pick.
  int64_t last_ns = 0;
  size_t last_bytes = 0;
  MeasuredChoice::Pick last;
};

// Times this rank's part of a call of `choice` (one whose pick said it is
// timed), from here to the end of the scope, unless the call failed (threw).
class TimedWay {
 public:
  explicit TimedWay(RankZeroChoice& choice)
      : choice_(choice), exceptions_(std::uncaught_exceptions()), began_(std::chrono::steady_clock::now()) {}
  ~TimedWay() {
    if (std::uncaught_exceptions() != exceptions_) return;
    const auto took = std::chrono::steady_clock::now() - began_;
    choice_.last_ns = std::max<int64_t>(1, std::chrono::duration_cast<std::chrono::nanoseconds>(took).count());
    choice_.last_bytes = choice_.bytes;
    choice_.last = choice_.now;
  }
  TimedWay(const TimedWay&) = delete;
  TimedWay& operator=(const TimedWay&) = delete;

 private:
  RankZeroChoice& choice_;
  int exceptions_;
  std::chrono::steady_clock::time_point began_;
};

}  // namespace tdist::shm_engine
