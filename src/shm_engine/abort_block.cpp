// The abort block of a host segment (AbortBlock in layout.h): claiming it for a
// round, withdrawing a claim when that round completed after all, and reading
// the verdict.
//
// Why every rank agrees. A rank completes round r only after seeing every
// rank arrive at r and then finding no verdict that fails r. A rank that gives
// up on r first claims the block (pending), then looks at the arrivals again.
// If someone is still missing, that rank's arrival comes after the claim, so
// it and everyone who waits for it find the claim when they look after the
// round: nobody completes r, and the claim becomes final. If everyone has
// arrived, someone may already have completed r without seeing the claim: the
// claim is withdrawn and the giving-up rank completes r too. The claim, the
// arrivals and the looks after each round are sequentially consistent, which
// is what makes "arrival after the claim" and "look after the arrival" hold.
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "shm_engine/host_segment.h"

namespace tdist::shm_engine {

namespace {
// A pending claim is decided within a few instructions by its owner; a waiter
// takes it as final after this long, should its owner have been stopped or
// killed right between the two.
constexpr std::chrono::seconds kPendingLimit{1};
}  // namespace

bool HostSegment::claim_abort(uint32_t round, const std::string& reason, Claim how, int only) {
  auto last_arrived = [this](int q) { return lines_[q].round.load(std::memory_order_seq_cst); };
  for (;;) {
    uint64_t seen = abort_->state.load(std::memory_order_seq_cst);
    if (seen != 0) {
      if (verdict() != 0) break;  // an earlier verdict stands
      continue;                   // it was withdrawn: claim again
    }
    if (!abort_->state.compare_exchange_strong(seen, abort_state::make(rank_, round, false),
                                               std::memory_order_seq_cst))
      continue;
    if (how == Claim::UnlessAllArrived) {
      // A wait for one rank (a post round's root) completes once that rank
      // arrived, or posted its entry for the round (post_and_await takes that
      // for its arrival).
      bool everyone = true;
      if (only >= 0)
        everyone = static_cast<int32_t>(last_arrived(only) - round) >= 0 || post_for(only, round) != nullptr;
      for (int q = 0; q < size_ && everyone && only < 0; ++q)
        everyone = static_cast<int32_t>(last_arrived(q) - round) >= 0;
      if (everyone) {
        abort_->state.store(0, std::memory_order_seq_cst);
        return false;
      }
    } else if (how == Claim::AfterMyArrivals) {
      // Another thread of this process may have arrived since `round` was
      // read: that round may complete. One arriving after this look finds
      // the claim when it looks after its round.
      if (const uint32_t next = last_arrived(rank_) + 1; static_cast<int32_t>(next - round) > 0) round = next;
    }
    const size_t len = std::min(reason.size(), sizeof(abort_->reason) - 1);
    std::memcpy(abort_->reason, reason.data(), len);
    abort_->reason[len] = '\0';
    abort_->state.store(abort_state::make(rank_, round, true), std::memory_order_seq_cst);
    break;
  }
  wake_all();
  return true;
}

void HostSegment::abort(const std::string& reason) {
  // The round this rank arrived at last fails too unless every rank arrived
  // at it (then it may have completed somewhere): a rank waiting there for
  // one that never comes (a hung collective a watchdog aborts) fails now,
  // not at its deadline. Otherwise the next round fails.
  const uint32_t last = lines_[rank_].round.load(std::memory_order_seq_cst);
  if (!claim_abort(last, reason, Claim::UnlessAllArrived)) claim_abort(last + 1, reason, Claim::AfterMyArrivals);
}

uint64_t HostSegment::verdict() const {
  uint64_t s = abort_->state.load(std::memory_order_seq_cst);
  if (s == 0 || abort_state::is_final(s)) return s;
  const auto until = std::chrono::steady_clock::now() + kPendingLimit;
  for (;;) {
    sched_yield();
    s = abort_->state.load(std::memory_order_seq_cst);
    if (s == 0 || abort_state::is_final(s)) return s;
    if (std::chrono::steady_clock::now() > until) return s | abort_state::kFinal;
  }
}

}  // namespace tdist::shm_engine
