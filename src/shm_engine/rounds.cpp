// Rounds of the host segment: arriving, waiting for every rank, and the errors of a
// round that does not complete.
//
// Memory ordering. A rank writes its data for round r, then stores r into its
// counter (release); the others load the counter (acquire) and, once they see
// r, read the data. Sleeping needs more: a waiter increments the sleepers
// count of the counter it waits on, then re-reads the counter, and sleeps only
// if it still holds the old value (futex_wait re-checks that atomically); the
// owner stores the counter, then reads the sleepers count and wakes only if it
// is non-zero. Those four operations are seq_cst, so either the owner sees the
// sleeper or the sleeper sees the new value: no lost wake-up, and no syscall
// while everyone polls.
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <string>

#include "shm_engine/host_segment.h"
#include "tdist/errors.h"
#include "util/cpu_relax.h"
#include "util/error_context.h"
#include "util/futex.h"
#include "util/home_cpu.h"

namespace tdist::shm_engine {

namespace {

// Sleeps are cut into slices so that a waiter re-checks the deadline, the
// transport (a lost peer) and the abort block at least this often.
constexpr std::chrono::milliseconds kSlice{20};
// How often a waiter on the slow path looks whether the missing ranks' processes live.
constexpr std::chrono::milliseconds kLivenessEvery{100};
// How long a patient wait polls and yields before it sleeps.
constexpr std::chrono::microseconds kPatientSpin{5};

// "all_reduce #2 on float32 (4096 elements, SUM)", or "it on ..." where
// `op_known` (the other call is the same operation). The size is left out
// where it is not one (all_to_all publishes its rounds there).
std::string describe_call(Signature s, uint64_t tag, bool with_size, bool op_known = false) {
  const int dtype = static_cast<int>((s.what >> 8) & 0xff) - 1;
  const int op = static_cast<int>((s.what >> 16) & 0xff) - 1;
  const long root = static_cast<long>(s.what >> 32) - 1;
  std::string out =
      op_known ? std::string("it") : std::string(op_code_name(tag)) + " #" + std::to_string(sequence_of(tag));
  std::string args;
  auto add = [&](const std::string& a) { args += (args.empty() ? "" : ", ") + a; };
  if (dtype >= 0) {
    const auto d = static_cast<DType>(dtype);
    out += " on " + std::string(dtype_name(d));
    if (with_size) add(std::to_string(s.size / dtype_size(d)) + " elements");
  } else if (with_size) {
    add(std::to_string(s.size) + " bytes");
  }
  if (op >= 0) add(std::string(ReduceOp(static_cast<ReduceOp::Kind>(op)).name()));
  if (root >= 0) add("root " + std::to_string(root));
  return args.empty() ? out : out + " (" + args + ")";
}

}  // namespace

uint32_t HostSegment::publish_and_arrive(CollectiveContext& ctx, Signature sig) {
  settle(ctx);
  const uint32_t r = round_ + 1;
  RankLine& me = line(rank_);
  me.what[r & 1].store(sig.what, std::memory_order_relaxed);
  me.size[r & 1].store(sig.size, std::memory_order_relaxed);
  me.tag[r & 1].store(ctx.tag, std::memory_order_relaxed);
  arrive(r);
  return r;
}

uint32_t HostSegment::start(CollectiveContext& ctx, Signature sig, bool sizes_may_differ) {
  const uint32_t r = publish_and_arrive(ctx, sig);
  wait_all(r, ctx);
  confirmed_ = r;
  check_verdict(r, ctx);
  check_signatures(ctx, r, sig, sizes_may_differ);
  return r;
}

uint32_t HostSegment::sync(CollectiveContext& ctx) {
  settle(ctx);
  const uint32_t r = round_ + 1;
  arrive(r);
  wait_all(r, ctx);
  confirmed_ = r;
  check_verdict(r, ctx);
  return r;
}

uint32_t HostSegment::start_and_leave(CollectiveContext& ctx, Signature sig) {
  const uint32_t r = publish_and_arrive(ctx, sig);
  left_checks_ = true;
  left_sig_ = sig;
  left_tag_ = ctx.tag;
  return r;
}

uint32_t HostSegment::sync_and_leave(CollectiveContext& ctx) {
  settle(ctx);
  const uint32_t r = round_ + 1;
  arrive(r);
  left_checks_ = false;
  return r;
}

// The others cannot have written the signatures of round_ over yet: they
// write that parity (or post entry) again two rounds (kPostDepth rounds)
// later, after waiting for this rank to arrive at a round in between.
void HostSegment::settle_slow(CollectiveContext& ctx) {
  wait_all(round_, ctx);
  confirmed_ = round_;
  check_verdict(round_, ctx);
  if (left_checks_) {
    left_checks_ = false;
    check_signatures(ctx, round_, left_sig_, false, left_tag_);
  }
}

// The entry of round r last held round r - kPostDepth, which every rank has
// read once it arrived at r - kPostDepth + 1 (so has its payload). Early
// rounds wait for nothing: the signed difference puts round 0 and below
// behind confirmed_. Once it looks, it takes the last round everyone has
// reached, which usually covers many rounds to come.
uint32_t HostSegment::next_post_round(CollectiveContext& ctx) {
  const uint32_t r = round_ + 1;
  const uint32_t freed = r - (kPostDepth - 1);
  if (static_cast<int32_t>(confirmed_ - freed) < 0) {
    wait_all(freed, ctx);
    uint32_t least = round_;
    for (int q = 0; q < size_; ++q) {
      const uint32_t at = lines_[q].round.load(std::memory_order_acquire);
      if (static_cast<int32_t>(at - least) < 0) least = at;
    }
    confirmed_ = least;
  }
  // A round that failed anywhere fails every later one: this rank hears of
  // it here, whether or not it waits for anyone in this operation.
  check_verdict(r, ctx);
  return r;
}

uint32_t HostSegment::post(CollectiveContext& ctx, Signature sig, const void* data, size_t n, bool awaited) {
  const uint32_t r = round_ + 1;
  PostEntry& e = posts_[static_cast<size_t>(rank_) * kPostDepth + r % kPostDepth];
  e.what.store(sig.what, std::memory_order_relaxed);
  e.size.store(sig.size, std::memory_order_relaxed);
  if (n <= kWordBytes)
    e.word.store(word_of(data, n), std::memory_order_relaxed);
  else
    std::memcpy(base_ + layout_.payload_offset(rank_, r), data, n);  // published by the stores below
  e.tag.store(ctx.tag, std::memory_order_relaxed);
  line(rank_).posted.store(r, std::memory_order_relaxed);
  // For a rank that others await alone (a broadcast's root), the entry is an
  // arrival in itself (post_and_await), ordered with the abort block as the
  // counter is (abort_block.cpp); for the others the counter publishes it,
  // and `posted` with it.
  e.round.store(round64_ + 1, awaited ? std::memory_order_seq_cst : std::memory_order_relaxed);
  arrive(r);
  return r;
}

uint32_t HostSegment::post_and_leave(CollectiveContext& ctx, Signature sig, const void* data, size_t n,
                                     bool awaited) {
  const uint32_t r = post(ctx, sig, data, n, awaited);
  left_checks_ = true;
  left_sig_ = sig;
  left_tag_ = ctx.tag;
  return r;
}

uint32_t HostSegment::post_and_await(CollectiveContext& ctx, Signature sig, int root) {
  const uint32_t r = post(ctx, sig, nullptr, 0, false);
  left_checks_ = false;
  // The root's entry, once it is for r, says it arrived, and brings its
  // signature and word in the same miss; its counter is a second line. Past a
  // short poll, the wait goes by the counter (futex, liveness, deadline).
  // No poll when the root last ran on this CPU: it most likely waits for
  // this very core, and wait_all yields it at once.
  bool posted = post_for(root, r) != nullptr;
  if (!posted && line(root).cpu.load(std::memory_order_relaxed) != cpu_)
    for (int i = 0; i < 256 && !(posted = post_for(root, r) != nullptr); ++i) cpu_relax();
  if (!posted) wait_all(r, ctx, root);
  check_verdict(r, ctx);
  check_signatures(ctx, r, sig, false, 0, root);
  return r;
}

uint64_t HostSegment::tag_of(int q, uint32_t first) const {
  if (const PostEntry* e = posted_for(q, first)) return e->tag.load(std::memory_order_relaxed);
  return line(q).tag[first & 1].load(std::memory_order_relaxed);
}

uint64_t HostSegment::size_of(int r, uint32_t first) const { return signature_of(r, first).size; }

void HostSegment::arrive(uint32_t round) {
  const int cpu = return_home();
  round64_ += static_cast<uint32_t>(round - round_);
  round_ = round;
  RankLine& me = line(rank_);
  cpu_ = static_cast<uint32_t>(cpu);
  me.cpu.store(cpu_, std::memory_order_relaxed);
  me.round.store(round, std::memory_order_seq_cst);
  if (me.sleepers.load(std::memory_order_seq_cst) != 0) futex_wake(&me.round);
}

int HostSegment::first_missing(uint32_t round, int from, int only) const {
  if (only >= 0) return arrived(only, round) ? -1 : only;
  for (int q = from; q < size_; ++q)
    if (q != rank_ && !arrived(q, round)) return q;
  for (int q = 0; q < from; ++q)
    if (q != rank_ && !arrived(q, round)) return q;
  return -1;
}

// The next rank after q (not wrapping) that has not arrived; -1 if none.
int HostSegment::next_missing(uint32_t round, int q, int only) const {
  if (only >= 0) return -1;
  for (int r = q + 1; r < size_; ++r)
    if (r != rank_ && !arrived(r, round)) return r;
  return -1;
}

void HostSegment::wait_all(uint32_t round, CollectiveContext& ctx, int only) {
  int q = first_missing(round, 0, only);
  if (q < 0) return;
  auto poll = [&](int times) {
    for (int i = 0; i < times && q >= 0; ++i) {
      cpu_relax();
      if (arrived(q, round)) q = first_missing(round, q, only);
    }
  };
  // A peer that is about to arrive usually does within a few hundred polls:
  // look before reading the clock, which costs more than a poll (tens of ns
  // in a VM) and is the only thing a short wait would spend time on.
  if (line(q).cpu.load(std::memory_order_relaxed) != cpu_) {
    poll(64);
    if (q < 0) return;
  }
  const auto start = Clock::now();
  // With a core for every rank, poll a while: the ranks of a collective
  // arrive microseconds apart, and a yield would notice late. Not when the
  // awaited rank last ran on this CPU: then it most likely waits for it.
  if (!ctx.patient && line(q).cpu.load(std::memory_order_relaxed) != cpu_)
    while (q >= 0 && Clock::now() - start < poll_only_) poll(32);
  // Then poll in bursts until spin_ has passed, yielding the core between
  // them: when the awaited rank waits for this very core (more runnable
  // threads than cores, whether ours or not), it runs at once; when it runs
  // elsewhere, the yield returns at once and costs a syscall. A patient wait
  // (for a rank on the network) yields only briefly: the 50 us of yields cost
  // a 2x2 hierarchical 8-byte all_reduce half its time (docs/algorithms.md).
  const auto spin = ctx.patient ? std::min<std::chrono::nanoseconds>(spin_, kPatientSpin) : spin_;
  while (q >= 0 && Clock::now() - start < spin) {
    sched_yield();
    poll(16);
  }
  if (q >= 0) wait_slow(round, q, ctx, only);
}

void HostSegment::wait_slow(uint32_t round, int q, CollectiveContext& ctx, int only) {
  for (;;) {
    // Once every rank has arrived the round completes, whatever happened
    // since: a rank that failed later (in its next round), or that finished
    // and left (its connection closed), did so after writing its data. So the
    // arrivals are checked before the abort block and the transport.
    if ((q = first_missing(round, q, only)) < 0) return;
    // A verdict on a later round means its owner completed this one: every
    // rank arrived, and the next look will see it.
    if (abort_->state.load(std::memory_order_seq_cst) != 0)
      if (const uint64_t v = verdict(); abort_state::fails(v, round)) fail(ctx, aborted_by(v));
    // Only a missing rank's goodbye or lost connection dooms the round: a
    // rank that arrived may have left (Leaving, or destroyed its group) since.
    bool lost = false;
    for (int m = first_missing(round, 0, only); m >= 0 && !lost; m = next_missing(round, m, only))
      if (has_left(m)) {
        give_up(ctx, "waiting for " + missing_ranks(round, only) + ": " +
                         peer_left_text(ctx.transport.describe_peer(m), kLeftByDestroy), only);
        lost = true;  // withdrawn: everyone arrived after all
      }
    if (lost) continue;
    for (int m = first_missing(round, 0, only); m >= 0 && !lost; m = next_missing(round, m, only))
      if (auto cause = ctx.transport.peer_failure(m)) {
        give_up(ctx, "waiting for " + missing_ranks(round, only) + ": " + error_message(cause), only);
        lost = true;  // withdrawn: everyone arrived after all
      }
    if (lost) continue;
    // A rank this one has no socket to (pairs connect on first use) is seen
    // dead by its process, checked every few slices.
    const auto now = Clock::now();
    if (now >= next_liveness_check_) {
      next_liveness_check_ = now + kLivenessEvery;
      for (int m = first_missing(round, 0, only); m >= 0 && !lost; m = next_missing(round, m, only))
        if (process_gone(m)) {
          give_up(ctx, "waiting for " + missing_ranks(round, only) + ": the process of " + describe_rank(m) +
                           " has exited (it died or was killed)", only);
          lost = true;
        }
      if (lost) continue;
    }
    if (!ctx.deadline.is_never() && now >= ctx.deadline.at()) {
      give_up(ctx, "Timed out after " + format_ms(ctx.deadline.timeout()) + ": " + missing_ranks(round, only) +
                       " did not arrive", only);
      continue;
    }
    std::chrono::nanoseconds slice = kSlice;
    if (!ctx.deadline.is_never()) slice = std::min(slice, std::chrono::nanoseconds(ctx.deadline.at() - now));

    RankLine& awaited = line(q);
    awaited.sleepers.fetch_add(1, std::memory_order_seq_cst);
    const uint32_t seen = awaited.round.load(std::memory_order_seq_cst);
    if (static_cast<int32_t>(seen - round) < 0) futex_wait(&awaited.round, seen, slice);
    awaited.sleepers.fetch_sub(1, std::memory_order_relaxed);
  }
}

// `left` is the tag of the operation this rank left early (0: the current
// one): the error then names that operation too.
void HostSegment::check_signatures(CollectiveContext& ctx, uint32_t first, Signature mine, bool sizes_may_differ,
                                   uint64_t left, int only) {
  auto when = [left] {
    if (left == 0) return std::string();
    return "in " + std::string(op_code_name(left)) + " #" + std::to_string(sequence_of(left)) +
           ", which this rank left early: ";
  };
  const uint64_t my_tag = left != 0 ? left : ctx.tag;
  const int begin = only >= 0 ? only : 0, end = only >= 0 ? only + 1 : size_;
  for (int q = begin; q < end; ++q) {
    if (q == rank_) continue;
    const Signature theirs = signature_of(q, first);
    const bool sizes_differ = !sizes_may_differ && theirs.size != mine.size;
    if (theirs.what == mine.what && !sizes_differ) continue;
    const uint64_t their_tag = tag_of(q, first);
    // "rank 1 called all_reduce #2 on float32 (4096 elements, SUM) while rank 0 called it on int32 (...)"
    const bool same_call =
        (theirs.what & 0xff) == (mine.what & 0xff) && operation_of(their_tag) == operation_of(my_tag);
    const std::string calls = describe_rank(q) + " called " + describe_call(theirs, their_tag, !sizes_may_differ) +
                              " while " + describe_rank(rank_) + " called " +
                              describe_call(mine, my_tag, !sizes_may_differ, same_call);
    if (theirs.what != mine.what)
      fail(ctx, when() + (same_call ? "the ranks called one collective with different arguments: "
                                    : "the ranks are out of step: ") + calls);
    fail(ctx, when() + "size mismatch: " + calls + " (the ranks passed different sizes)");
  }
}

std::string HostSegment::failure_message(CollectiveContext& ctx, const std::string& what) const {
  return "shared-memory " + std::string(op_code_name(ctx.tag)) + " #" + std::to_string(sequence_of(ctx.tag)) +
         " (round " + std::to_string(round_) + "): " + what;
}

void HostSegment::fail(CollectiveContext& ctx, const std::string& what) {
  std::string message = failure_message(ctx, what);
  // The others stop waiting for this rank at once, and can say why.
  claim_abort(round_, label_ + ": " + message, Claim::Final);
  throw DistBackendError(message);
}

void HostSegment::give_up(CollectiveContext& ctx, const std::string& what, int only) {
  std::string message = failure_message(ctx, what);
  if (claim_abort(round_, label_ + ": " + message, Claim::UnlessAllArrived, only)) throw DistBackendError(message);
}

void HostSegment::check_verdict_slow(uint32_t round, CollectiveContext& ctx) {
  if (const uint64_t v = verdict(); abort_state::fails(v, round)) fail(ctx, aborted_by(v));
}

std::string HostSegment::aborted_by(uint64_t verdict) const {
  return describe_rank(abort_state::owner(verdict)) + " failed first: " + std::string(abort_->reason);
}

std::string HostSegment::describe_rank(int r) const {
  int global = r >= 0 && r < static_cast<int>(global_ranks_.size()) ? global_ranks_[r] : r;
  std::string out = "rank " + std::to_string(global);
  if (global != r) out += " (group rank " + std::to_string(r) + ")";
  return out;
}

std::string HostSegment::missing_ranks(uint32_t round, int only) const {
  std::vector<int> missing;
  for (int q = 0; q < size_; ++q)
    if (q != rank_ && (only < 0 || q == only) && !arrived(q, round)) missing.push_back(q);
  if (missing.size() == 1) return describe_rank(missing[0]);
  std::string global = "ranks [", group = " (group ranks [";
  bool remapped = false;
  for (size_t i = 0; i < missing.size(); ++i) {
    int g = missing[i] < static_cast<int>(global_ranks_.size()) ? global_ranks_[missing[i]] : missing[i];
    remapped = remapped || g != missing[i];
    if (i > 0) {
      global.append(", ");
      group.append(", ");
    }
    global.append(std::to_string(g));
    group.append(std::to_string(missing[i]));
  }
  return global + "]" + (remapped ? group + "])" : "");
}

}  // namespace tdist::shm_engine
