// The flight recorder of one group: rings of its last N operations, written
// by the front (src/process_group) when it issues one and by the backend when
// it starts and ends it, read out by dumps (trace/recorder_registry.cpp), timelines
// and observers (include/tdist/trace.h). Format: docs/trace_format.md.
//
// Cost is the design constraint: this sits on the path of every 8-byte
// collective, which takes about a third of a microsecond here, and may cost
// it 2% (docs/tracing.md has the measurements). So an entry is one cache
// line written with a handful of plain stores, and no lock, locked
// instruction, allocation or clock read of its own:
// - collectives have a ring whose counter is plain: the front issues a
//   group's collectives one at a time, in the one order every rank issues
//   them in (concurrent issuers of collectives on one group are not a working
//   program: the ranks would disagree on the order). Point-to-point
//   operations, which threads may issue concurrently, have a ring of their
//   own (made at the first one) with an atomic counter. In both, an entry's
//   sequence number is its position plus one;
// - what the front writes is packed into a few words under a per-slot
//   sequence lock (a dump reading a slot rewritten under it drops the entry);
// - what the backend writes later ends with a stamp (the entry's position,
//   the engine, the state) that tells a reader whether those fields belong to
//   this entry or are a previous one's, so begin() resets nothing;
// - times are read by the backend, once, where it reads the clock anyway for
//   the operation's deadline: the coarse clock for a small blocking operation
//   (a counter read would cost it 3%), the time-stamp counter for the others
//   (util/tick_clock.h). The end time is read only where someone watches the
//   ends (a timeline, an observer) or the operation failed.
// Shapes of more than one tensor, or that do not fit two words, take the
// recorder's mutex and an allocation: those calls allocate anyway. A slot
// reused while its operation is still in flight (more than N operations in
// flight at once) may show the later entry as queued: the stamps disagree.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "tdist/operation.h"
#include "tdist/reduce_op.h"
#include "tdist/tensor.h"
#include "tdist/trace.h"
#include "trace/engine_kind.h"
#include "util/tick_clock.h"

namespace tdist {
class Work;
}

namespace tdist::trace {

enum class OpState : uint8_t { Queued, Started, Completed, Failed };
const char* state_name(OpState s);

// The operations and their names: the one table in tdist/operation.h.
using OpKind = tdist::OpKind;
// The name of the engine a stamp holds (trace/engine_kind.h).
const char* engine_name(uint8_t code);

// Set while a timeline or an observer wants every operation's end time.
extern std::atomic<bool> g_observed;
// Set: the front records nothing (for bench/recorder_overhead.cpp, which
// times one group with and without its recorder).
extern std::atomic<bool> g_paused;

// What the front knows of an operation when it issues it.
struct OpInfo {
  OpKind op = OpKind::Barrier;
  bool p2p = false;
  int root = -1;  // group rank
  int peer = -1;  // group rank
  uint8_t reduce = 0;  // ReduceOp::Kind + 1; 0: none
};
inline uint8_t reduce_code(const ReduceOp& op) { return static_cast<uint8_t>(op.kind() + 1); }

template <typename T>
using Relaxed = std::atomic<T>;  // slot fields: a plain move on x86, and no data race with a reader

// One entry: one cache line. The front writes the first five words under
// the sequence lock; the backend the last three, ending with the stamp. What
// is rare (long shapes, a failure's message, a start or end time read on
// another thread or for an observer) is in the recorder's cold entries.
struct alignas(64) FlightSlot {
  Relaxed<uint64_t> version{0};  // odd while begin() writes; even (2 * position + 2) after
  // op | reduce << 8 | dtype << 16 | ndim << 24 | p2p << 32 | dims layout << 40; dtype 0xff: none.
  Relaxed<uint64_t> desc{0};
  Relaxed<uint64_t> root_peer{0};  // (uint32) root | (uint32) peer << 32
  Relaxed<uint64_t> dims[2] = {};  // by layout: two dimensions, or up to eight below 2^16 (16 bits each)
  // Ticks: read by the front (0: it leaves it to the backend), or the
  // backend's; with the stamp's coarse flag, ns of the coarse steady clock.
  Relaxed<uint64_t> queued{0};
  // position << 16 | 1 << 15 | coarse << 14 | engine code << 8 | state; valid for its position.
  Relaxed<uint64_t> stamp{0};
  Relaxed<const char*> algorithm{nullptr};
};
static_assert(sizeof(FlightSlot) == 64);

// How a slot holds the shapes. Wide: one input of up to 2 dimensions, one
// in each word; Packed: up to 8 of 16 bits; Pair: one input and one output
// of at most one dimension each (all_gather_into_tensor, reduce_scatter_tensor,
// all_to_all_single), the input's length in dims[0] and the output's in
// dims[1], their numbers of dimensions in ndim's two halves; Long: in the
// ring's cold part, under its lock (a copy of every shape: allocations).
enum class DimsLayout : uint8_t { None, Wide, Packed, Long, Pair };

class FlightRecorder;

// One operation's entry, for the backend that runs it. Empty (no recorder, or
// none handed over) makes every call a no-op.
class FlightMark {
 public:
  FlightMark() = default;
  explicit operator bool() const { return slot_ != nullptr; }
  // The engine that will run it (before it starts).
  void engine(EngineKind kind) { engine_ = static_cast<uint8_t>(kind); }
  // Queued at `ticks` to run later, on another thread.
  [[gnu::always_inline]] void queued(uint64_t ticks) const {
    if (!slot_) return;
    slot_->queued.store(ticks, std::memory_order_relaxed);
    stamp(OpState::Queued);
  }
  // Whether its times are worth a read of the counter (util/tick_clock.h):
  // an operation of some size, or one somebody watches. Else the backend
  // stamps it with the coarse clock its deadline reads anyway.
  bool precise() const { return precise_; }
  // Started at `ticks` on the issuing thread, right away (queued then too).
  [[gnu::always_inline]] void started_inline(uint64_t ticks) const {
    if (!slot_) return;
    slot_->queued.store(ticks, std::memory_order_relaxed);
    stamp(OpState::Started);
  }
  // The same, at `steady_ns` of the coarse clock.
  [[gnu::always_inline]] void started_inline_coarse(int64_t steady_ns) const {
    if (!slot_) return;
    coarse_ = true;
    slot_->queued.store(static_cast<uint64_t>(steady_ns), std::memory_order_relaxed);
    stamp(OpState::Started);
  }
  // Started at `ticks` on another thread, after queued().
  void started(uint64_t ticks) const;
  // `algorithm` is static text, or null (unknown). A failure dumps the
  // recorder where a destination is set (once per group).
  [[gnu::always_inline]] void ended(const std::exception_ptr& error, const char* algorithm = nullptr) const {
    if (!slot_) return;
    slot_->algorithm.store(algorithm, std::memory_order_relaxed);
    if (error || g_observed.load(std::memory_order_relaxed))
      ended_slow(error);
    else
      stamp(OpState::Completed);
  }
  // Keeps the recorder alive for a mark that may outlive its group's front
  // (an operation left in a queue, a Work the caller holds).
  std::shared_ptr<FlightRecorder> hold() const;

 private:
  friend class FlightRecorder;
  FlightMark(FlightRecorder* recorder, FlightSlot* slot, uint64_t position, bool precise)
      : recorder_(recorder), slot_(slot), position_(position), precise_(precise) {}
  [[gnu::always_inline]] void stamp(OpState state) const {
    slot_->stamp.store(position_ << 16 | uint64_t{1} << 15 | uint64_t{coarse_} << 14 | uint64_t{engine_} << 8 |
                           static_cast<uint8_t>(state),
                       std::memory_order_release);
  }
  void ended_slow(const std::exception_ptr& error) const;
  FlightRecorder* recorder_ = nullptr;
  FlightSlot* slot_ = nullptr;
  uint64_t position_ = 0;  // in its ring; sequence number - 1
  uint8_t engine_ = 0;
  bool precise_ = true;
  mutable bool coarse_ = false;  // stamped with the coarse clock
};

// Operations of at least this many elements get counter reads (FlightMark::precise).
inline constexpr int64_t kPreciseElements = 4096;

// The front's scope around one call into a backend: the call's Operation
// points at it (Operation::trace), so the backend that runs the operation
// finds the entry there (claim_mark), and the front ends it itself if no
// backend took it.
class FlightScope {
 public:
  explicit FlightScope(FlightMark mark) : mark_(mark) {}
  FlightScope(const FlightScope&) = delete;
  FlightScope& operator=(const FlightScope&) = delete;
  bool claimed() const { return claimed_; }
  // The call returned this work: a backend that did not take the mark (its
  // name says which engine) is taken to have run the operation before
  // returning, when the work says so.
  void returned(const Work& work, const std::string& backend);
  void returned_ok() {  // a call with no Work (blocking send)
    if (!claimed_) mark_.ended(nullptr);
  }
  void threw(const std::exception_ptr& error) {  // the call threw
    if (!claimed_) mark_.ended(error);
  }

 private:
  FlightMark mark_;
  bool claimed_ = false;
  friend FlightMark claim_mark(const Operation& op);
};

// The backend's side: the entry of `op` (empty when its group records
// nothing, or a part of the backend already claimed it). The backend then
// stamps its queueing, start and end.
inline FlightMark claim_mark(const Operation& op) {
  FlightScope* scope = op.trace;
  if (!scope || scope->claimed_) return {};
  scope->claimed_ = true;
  return scope->mark_;
}

class FlightRecorder : public std::enable_shared_from_this<FlightRecorder> {
 public:
  FlightRecorder(std::string group, std::string backend, std::vector<int> global_ranks, int group_rank,
                 size_t capacity);
  ~FlightRecorder();
  FlightRecorder(const FlightRecorder&) = delete;
  FlightRecorder& operator=(const FlightRecorder&) = delete;

  // Records an operation issued now (state queued). `outputs` only where
  // they differ from the inputs. `issued`: the clock now, or 0 where the
  // backend will say when the operation was queued (it claims the mark).
  [[gnu::always_inline]] FlightMark begin(const OpInfo& info, std::span<const Tensor> inputs,
                                          std::span<const Tensor> outputs, uint64_t issued) {
    if (!info.p2p && inputs.size() == 1 && outputs.empty() && inputs[0].shape().size() <= 2)
      return begin_collective(info, inputs[0], issued);
    return begin_any(info, inputs, outputs, issued);
  }

  const std::string& group() const { return group_; }
  size_t capacity() const { return capacity_; }
  // Whether this group's backend stamps the times itself (learned from its
  // first operation): until then the front reads the clock at issue.
  bool backend_stamps() const { return backend_stamps_.load(std::memory_order_relaxed); }
  void note_backend_stamps() { backend_stamps_.store(true, std::memory_order_relaxed); }
  // This group's section of a dump (a JSON object), times converted by `clock`.
  std::string dump_json(const TickConversion& clock);

  using Slot = FlightSlot;
  struct Cold;  // what is rare: long shapes, a failure's message
  struct Ring {
    explicit Ring(size_t capacity);
    ~Ring();
    std::vector<Slot> slots;  // a power of two at least N: a slot is a mask away
    std::unique_ptr<Cold[]> cold;  // by slot, under the recorder's mutex
    const uint64_t mask;
    Relaxed<uint64_t> next{0};  // entries handed out
  };

 private:
  friend class FlightMark;
  // The path of a small collective: one tensor of a few dimensions, written
  // where it is called (the front), without a call.
  [[gnu::always_inline]] FlightMark begin_collective(const OpInfo& info, const Tensor& tensor, uint64_t issued) {
    Ring& ring = *collectives_;
    const uint64_t position = ring.next.load(std::memory_order_relaxed);
    ring.next.store(position + 1, std::memory_order_relaxed);  // one issuer at a time (see above)
    Slot& s = ring.slots[position & ring.mask];
    const auto& shape = tensor.shape();
    uint64_t dims[2] = {0, 0};
    const DimsLayout layout = pack_dims(shape, dims);
    open_slot(s, position, info, static_cast<uint8_t>(tensor.dtype()), static_cast<uint8_t>(shape.size()), layout);
    s.dims[0].store(dims[0], std::memory_order_relaxed);
    s.dims[1].store(dims[1], std::memory_order_relaxed);
    // The next entry's line, fetched for writing now: it was last written a
    // ring ago and has left this core's cache; a store that misses would
    // stall the backend's issue lock (a full barrier waits for it).
    __builtin_prefetch(&ring.slots[(position + 1) & ring.mask], 1);
    return close_slot(s, position, issued,
                      tensor.numel() >= kPreciseElements || g_observed.load(std::memory_order_relaxed));
  }
  // The shape in two words, if it fits one of the inline layouts.
  static DimsLayout pack_dims(const std::vector<int64_t>& shape, uint64_t (&dims)[2]) {
    if (shape.size() <= 2) {
      for (size_t d = 0; d < shape.size(); ++d) dims[d] = static_cast<uint64_t>(shape[d]);
      return DimsLayout::Wide;
    }
    if (shape.size() > 8) return DimsLayout::Long;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (static_cast<uint64_t>(shape[d]) >= (1u << 16)) return DimsLayout::Long;
      dims[d / 4] |= static_cast<uint64_t>(shape[d]) << (16 * (d % 4));
    }
    return DimsLayout::Packed;
  }
  FlightMark begin_any(const OpInfo& info, std::span<const Tensor> inputs, std::span<const Tensor> outputs,
                       uint64_t issued);
  static void open_slot(Slot& s, uint64_t position, const OpInfo& info, uint8_t dtype, uint8_t ndim,
                        DimsLayout layout) {
    s.version.store(2 * position + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    s.desc.store(uint64_t{static_cast<uint8_t>(info.op)} | uint64_t{info.reduce} << 8 | uint64_t{dtype} << 16 |
                     uint64_t{ndim} << 24 | uint64_t{info.p2p} << 32 | uint64_t{static_cast<uint8_t>(layout)} << 40,
                 std::memory_order_relaxed);
    s.root_peer.store(uint64_t{static_cast<uint32_t>(info.root)} | uint64_t{static_cast<uint32_t>(info.peer)} << 32,
                      std::memory_order_relaxed);
  }
  FlightMark close_slot(Slot& s, uint64_t position, uint64_t issued, bool precise) {
    s.queued.store(issued, std::memory_order_relaxed);
    s.version.store(2 * position + 2, std::memory_order_release);
    return FlightMark(this, &s, position, precise);
  }
  Ring& p2p_ring() {
    Ring* ring = p2p_.load(std::memory_order_acquire);
    return ring ? *ring : make_p2p_ring();
  }
  Ring& make_p2p_ring();
  // Entry `position` of `ring`; `after` (point-to-point): the collectives issued before it.
  bool read(const Ring& ring, uint64_t position, OpEvent& out, const TickConversion& clock, uint64_t* after);
  Ring& ring_of(const FlightSlot* slot);
  void end_observed(const FlightMark& mark, const std::exception_ptr& error);

  const std::string group_;
  const std::string backend_;
  const std::vector<int> global_ranks_;
  const int group_rank_;
  const size_t capacity_;
  std::unique_ptr<Ring> collectives_;
  // Made at the first point-to-point operation; p2p_ is null until then, so
  // that each later one finds it with one load (call_once costs four
  // thread-local accesses per call in a shared library).
  std::atomic<Ring*> p2p_{nullptr};
  std::unique_ptr<Ring> p2p_owned_;
  std::once_flag p2p_made_;
  std::mutex mu_;  // the rings' cold entries; the dump
  bool dumped_on_failure_ = false;  // guarded by mu_
  std::atomic<bool> backend_stamps_{false};
};

}  // namespace tdist::trace
