#include "trace/flight_recorder.h"

#include <algorithm>
#include <bit>
#include <climits>
#include <cstring>
#include <iterator>

#include "tdist/work.h"
#include "trace/json_writer.h"
#include "trace/recorder_registry.h"

namespace tdist::trace {

std::atomic<bool> g_observed{false};
std::atomic<bool> g_paused{false};

const char* state_name(OpState s) {
  switch (s) {
    case OpState::Queued: return "queued";
    case OpState::Started: return "started";
    case OpState::Completed: return "completed";
    case OpState::Failed: return "failed";
  }
  return "queued";
}

namespace {
constexpr const char* kReduceNames[] = {"", "sum", "avg", "product", "min", "max", "band", "bor", "bxor", "premul_sum"};
}  // namespace

const char* engine_name(uint8_t code) { return engine_kind_name(static_cast<EngineKind>(code)); }

namespace {

using Shapes = std::vector<std::vector<int64_t>>;

template <typename T>
T get(const Relaxed<T>& field) {
  return field.load(std::memory_order_relaxed);
}

Shapes shapes_of(std::span<const Tensor> tensors) {
  Shapes out;
  out.reserve(tensors.size());
  for (const Tensor& t : tensors) out.push_back(t.shape());
  return out;
}

}  // namespace

// What an entry rarely has, each valid for the position it names.
struct FlightRecorder::Cold {
  uint64_t shapes_position = ~uint64_t{0};
  Shapes inputs, outputs;  // when the slot's shapes are long
  uint64_t bytes = 0;      // of those inputs
  uint64_t times_position = ~uint64_t{0};
  uint64_t started = 0, ended = 0;  // ticks: a start on another thread, an end someone watched
  uint64_t error_position = ~uint64_t{0};
  std::string error;
};

FlightRecorder::Ring::Ring(size_t capacity)
    : slots(std::bit_ceil(std::max<size_t>(capacity, 1))), cold(new Cold[slots.size()]), mask(slots.size() - 1) {}
FlightRecorder::Ring::~Ring() = default;

// --- marks and scopes --------------------------------------------------------

void FlightMark::ended_slow(const std::exception_ptr& error) const { recorder_->end_observed(*this, error); }

void FlightMark::started(uint64_t ticks) const {
  if (!slot_) return;
  FlightRecorder::Ring& ring = recorder_->ring_of(slot_);
  {
    std::lock_guard<std::mutex> lock(recorder_->mu_);
    FlightRecorder::Cold& c = ring.cold[position_ & ring.mask];
    if (c.times_position != position_) {
      c.times_position = position_;
      c.ended = 0;
    }
    c.started = ticks;
  }
  stamp(OpState::Started);
}

std::shared_ptr<FlightRecorder> FlightMark::hold() const {
  return recorder_ ? recorder_->shared_from_this() : nullptr;
}

void FlightScope::returned(const Work& work, const std::string& backend) {
  if (claimed_ || !mark_) return;
  // Only the names of engines count: another backend's name says nothing of how it ran.
  if (const EngineKind kind = engine_kind_of(backend); kind != EngineKind::Unknown) mark_.engine(kind);
  // A backend that does not mark its operations: what the work says now is
  // all there is (a blocking call is over; an async one stays queued).
  if (work.completed_now()) mark_.ended(work.exception());
}

// --- the recorder ------------------------------------------------------------

FlightRecorder::FlightRecorder(std::string group, std::string backend, std::vector<int> global_ranks, int group_rank,
                               size_t capacity)
    : group_(std::move(group)),
      backend_(std::move(backend)),
      global_ranks_(std::move(global_ranks)),
      group_rank_(group_rank),
      capacity_(capacity),
      collectives_(std::make_unique<Ring>(capacity)) {
  register_recorder(this);
}

FlightRecorder::~FlightRecorder() { unregister_recorder(this); }

FlightRecorder::Ring& FlightRecorder::make_p2p_ring() {
  std::call_once(p2p_made_, [&] {
    p2p_owned_ = std::make_unique<Ring>(capacity_);
    p2p_.store(p2p_owned_.get(), std::memory_order_release);
  });
  return *p2p_.load(std::memory_order_acquire);
}

FlightMark FlightRecorder::begin_any(const OpInfo& info, std::span<const Tensor> inputs,
                                     std::span<const Tensor> outputs, uint64_t issued) {
  Ring& ring = info.p2p ? p2p_ring() : *collectives_;
  const uint64_t position = info.p2p ? ring.next.fetch_add(1, std::memory_order_relaxed)
                                     : ring.next.load(std::memory_order_relaxed);
  if (!info.p2p) ring.next.store(position + 1, std::memory_order_relaxed);  // one issuer at a time
  OpInfo placed = info;
  if (info.p2p) placed.root = static_cast<int>(static_cast<uint32_t>(collectives_->next.load(std::memory_order_relaxed)));
  Slot& s = ring.slots[position & ring.mask];
  const Tensor* first = !inputs.empty() ? &inputs[0] : !outputs.empty() ? &outputs[0] : nullptr;
  const uint8_t dtype = first ? static_cast<uint8_t>(first->dtype()) : 0xff;
  uint64_t dims[2] = {0, 0};
  DimsLayout layout = DimsLayout::None;
  uint8_t ndim = 0;
  int64_t elements = 0;
  for (const Tensor& t : inputs) elements += t.numel();
  const bool precise = elements >= kPreciseElements || g_observed.load(std::memory_order_relaxed);
  if (inputs.size() == 1 && outputs.empty()) {
    layout = pack_dims(inputs[0].shape(), dims);
    ndim = static_cast<uint8_t>(inputs[0].shape().size());
  } else if (inputs.size() == 1 && outputs.size() == 1 && inputs[0].shape().size() <= 1 &&
             outputs[0].shape().size() <= 1) {
    layout = DimsLayout::Pair;
    const auto& in = inputs[0].shape();
    const auto& out = outputs[0].shape();
    dims[0] = in.empty() ? 1 : static_cast<uint64_t>(in[0]);
    dims[1] = out.empty() ? 1 : static_cast<uint64_t>(out[0]);
    ndim = static_cast<uint8_t>(in.size() | out.size() << 4);
  } else if (!inputs.empty() || !outputs.empty()) {
    layout = DimsLayout::Long;
  }
  if (layout == DimsLayout::Long) {
    uint64_t bytes = 0;
    for (const Tensor& t : inputs) bytes += t.nbytes();
    Shapes in = shapes_of(inputs), out = shapes_of(outputs);
    std::lock_guard<std::mutex> lock(mu_);
    Cold& c = ring.cold[position & ring.mask];
    c.shapes_position = position;
    c.inputs = std::move(in);
    c.outputs = std::move(out);
    c.bytes = bytes;
  }
  open_slot(s, position, placed, dtype, ndim, layout);
  s.dims[0].store(dims[0], std::memory_order_relaxed);
  s.dims[1].store(dims[1], std::memory_order_relaxed);
  return close_slot(s, position, issued, precise);
}

FlightRecorder::Ring& FlightRecorder::ring_of(const FlightSlot* slot) {
  const auto& c = collectives_->slots;
  return slot >= c.data() && slot < c.data() + c.size() ? *collectives_ : *p2p_.load(std::memory_order_acquire);
}

// An end someone watches (a timeline, an observer), or a failure.
void FlightRecorder::end_observed(const FlightMark& mark, const std::exception_ptr& error) {
  const uint64_t ended = now_ticks();
  Ring& ring = ring_of(mark.slot_);
  std::string message;
  if (error) {
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      message = e.what();
    } catch (...) {
      message = "unknown error";
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    Cold& c = ring.cold[mark.position_ & ring.mask];
    if (c.times_position != mark.position_) {
      c.times_position = mark.position_;
      c.started = 0;
    }
    c.ended = ended;
    if (error) {
      c.error = message;
      c.error_position = mark.position_;
    }
  }
  mark.stamp(error ? OpState::Failed : OpState::Completed);
  if (g_observed.load(std::memory_order_relaxed)) {
    OpEvent event;
    if (read(ring, mark.position_, event, recent_conversion(), nullptr)) notify_observers(event);
  }
  if (!error) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (dumped_on_failure_) return;
    dumped_on_failure_ = true;
  }
  const bool timeout = Work::result_of(error) == WorkResult::TIMEOUT;
  dump_after_failure(timeout ? "timeout" : "failure", message);
}

bool FlightRecorder::read(const Ring& ring, uint64_t position, OpEvent& e, const TickConversion& clock,
                          uint64_t* after) {
  const Slot& s = ring.slots[position & ring.mask];
  const uint64_t v = 2 * position + 2;
  if (s.version.load(std::memory_order_acquire) != v) return false;
  const uint64_t desc = get(s.desc);
  const uint64_t root_peer = get(s.root_peer);
  const uint64_t dims[2] = {get(s.dims[0]), get(s.dims[1])};
  std::atomic_thread_fence(std::memory_order_acquire);
  if (get(s.version) != v) return false;

  const auto op = static_cast<OpKind>(desc & 0xff);
  const uint8_t reduce = (desc >> 8) & 0xff;
  const uint8_t dtype = (desc >> 16) & 0xff;
  const uint8_t ndim = (desc >> 24) & 0xff;
  const auto layout = static_cast<DimsLayout>((desc >> 40) & 0xff);
  e.group = group_;
  e.seq = position + 1;
  e.op = op_name(op);
  e.p2p = (desc >> 32) & 1;
  e.dtype = dtype == 0xff ? "" : std::string(dtype_name(static_cast<DType>(dtype)));
  e.reduce_op = reduce < std::size(kReduceNames) ? kReduceNames[reduce] : "";
  // A point-to-point operation has no root: that half holds the count of
  // collectives issued before it (its place in the dump).
  e.root = e.p2p ? -1 : static_cast<int32_t>(root_peer & 0xffffffff);
  if (after) *after = e.p2p ? (root_peer & 0xffffffff) : 0;
  e.peer = static_cast<int32_t>(root_peer >> 32);
  e.shapes.clear();
  e.out_shapes.clear();
  e.bytes = 0;
  if (layout == DimsLayout::Wide || layout == DimsLayout::Packed) {
    std::vector<int64_t> shape;
    for (int d = 0; d < std::min<int>(ndim, 8); ++d)
      shape.push_back(layout == DimsLayout::Wide ? static_cast<int64_t>(dims[d & 1])
                                                 : static_cast<int64_t>((dims[d / 4] >> (16 * (d % 4))) & 0xffff));
    if (layout == DimsLayout::Wide) shape.resize(std::min<int>(ndim, 2));
    uint64_t count = 1;
    for (int64_t d : shape) count *= static_cast<uint64_t>(d);
    e.shapes.push_back(std::move(shape));
    if (dtype != 0xff) e.bytes = count * dtype_size(static_cast<DType>(dtype));
  } else if (layout == DimsLayout::Pair) {
    auto shape_of = [](uint64_t length, int dimensions) {
      return dimensions == 0 ? std::vector<int64_t>{} : std::vector<int64_t>{static_cast<int64_t>(length)};
    };
    e.shapes.push_back(shape_of(dims[0], ndim & 0xf));
    e.out_shapes.push_back(shape_of(dims[1], ndim >> 4));
    if (dtype != 0xff) e.bytes = dims[0] * dtype_size(static_cast<DType>(dtype));
  }

  // The backend's fields, if its stamp says they are this entry's.
  const uint64_t stamp = s.stamp.load(std::memory_order_acquire);
  const bool stamped = (stamp & (uint64_t{1} << 15)) && (stamp >> 16) == (position & ((uint64_t{1} << 48) - 1));
  const auto state = stamped ? static_cast<OpState>(stamp & 0xff) : OpState::Queued;
  const uint64_t queued = get(s.queued);
  const bool coarse = stamped && (stamp & (uint64_t{1} << 14));
  const char* algorithm = stamped ? get(s.algorithm) : nullptr;
  e.state = state_name(state);
  e.engine = stamped ? engine_name((stamp >> 8) & 0x3f) : "";
  const bool over = state == OpState::Completed || state == OpState::Failed;
  e.algorithm = over && algorithm ? algorithm : "";
  uint64_t started = 0, ended = 0;
  e.error.clear();
  {
    std::lock_guard<std::mutex> lock(mu_);
    const Cold& c = ring.cold[position & ring.mask];
    if (layout == DimsLayout::Long && c.shapes_position == position) {
      e.shapes = c.inputs;
      e.out_shapes = c.outputs;
      e.bytes = c.bytes;
    }
    if (c.times_position == position) {
      started = c.started;
      ended = c.ended;
    }
    if (state == OpState::Failed && c.error_position == position) e.error = c.error;
  }
  e.queued_us = coarse ? clock.realtime_us_of_steady(static_cast<int64_t>(queued)) : clock.realtime_us(queued);
  e.time_resolution_us = coarse ? coarse_resolution_us() : 0;
  // Run where it was issued: it started when it was queued.
  e.started_us = state == OpState::Queued ? 0 : started ? clock.realtime_us(started) : e.queued_us;
  e.ended_us = over ? clock.realtime_us(ended) : 0;
  // Rewritten meanwhile: the fields may mix two entries.
  return get(s.version) == v;
}

std::string FlightRecorder::dump_json(const TickConversion& clock) {
  // Each ring in its own order; a point-to-point entry goes after the
  // collectives issued before it (times cannot say: a small collective's are coarse).
  std::vector<OpEvent> collectives, p2p;
  std::vector<uint64_t> p2p_after;
  uint64_t dropped = 0;
  const Ring* p2p_ring = p2p_.load(std::memory_order_acquire);
  for (const Ring* ring : {static_cast<const Ring*>(collectives_.get()), p2p_ring}) {
    if (!ring) continue;
    const uint64_t end = ring->next.load(std::memory_order_acquire);
    const uint64_t first = end > capacity_ ? end - capacity_ : 0;
    dropped += first;
    for (uint64_t i = first; i < end; ++i) {
      OpEvent e;
      uint64_t after = 0;
      if (!read(*ring, i, e, clock, &after)) {
        ++dropped;  // rewritten while this dump read it
        continue;
      }
      if (ring == collectives_.get()) {
        collectives.push_back(std::move(e));
      } else {
        p2p.push_back(std::move(e));
        p2p_after.push_back(after);
      }
    }
  }
  std::vector<OpEvent> entries;
  entries.reserve(collectives.size() + p2p.size());
  size_t c = 0;
  for (size_t k = 0; k < p2p.size(); ++k) {
    // The collectives' count wraps at 2^32: compare it with the seq's low half.
    while (c < collectives.size() &&
           static_cast<int32_t>(static_cast<uint32_t>(p2p_after[k]) - static_cast<uint32_t>(collectives[c].seq)) >= 0)
      entries.push_back(std::move(collectives[c++]));
    entries.push_back(std::move(p2p[k]));
  }
  while (c < collectives.size()) entries.push_back(std::move(collectives[c++]));
  JsonWriter w;
  w.begin_object();
  w.key("name").value(group_);
  w.key("desc").value(group_);
  w.key("backend").value(backend_);
  w.key("ranks").begin_array();
  for (int r : global_ranks_) w.value(r);
  w.end_array();
  w.key("group_rank").value(group_rank_);
  w.key("capacity").value(static_cast<uint64_t>(capacity_));
  w.key("dropped").value(dropped);
  w.key("entries").begin_array();
  for (const OpEvent& e : entries) write_event(w, e, /*with_group=*/false);
  w.end_array();
  w.end_object();
  return w.take();
}

}  // namespace tdist::trace
