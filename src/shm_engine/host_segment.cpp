// Setting a group's host segment up (segment creation and the store rendezvous),
// and failing it.
#include "shm_engine/host_segment.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <thread>

#include "tdist/errors.h"
#include "util/settings.h"
#include "util/futex.h"
#include "util/home_cpu.h"
#include "util/logging.h"
#include "util/peer_memory.h"
#include "util/process_identity.h"

namespace tdist::shm_engine {

namespace {

// Store keys, under the group's own prefix ("<group>/tdist/cpu/"), so that
// groups never see each other's segments.
constexpr const char* kSegmentKey = "shm_engine/segment";  // "+<slot bytes> <name>" or "-<why not>"
std::string status_key(int r) { return "shm_engine/status/" + std::to_string(r); }
std::string read_key(int r) { return "shm_engine/read/" + std::to_string(r); }

size_t requested_slot_bytes() {
  // A tuning and test knob: small slots exercise the chunked paths cheaply.
  return static_cast<size_t>(settings::get<"TDIST_SHM_SLOT_BYTES">());
}

// Rank 0: creates and initialises the segment. The atomics are constructed
// here, once; the other ranks use them through their own mappings.
ShmSegment create_segment(const Layout& layout) {
  ShmSegment seg = ShmSegment::create("arena", layout.total_bytes());
  char* base = static_cast<char*>(seg.data());
  auto* header = new (base) Header{};
  header->magic = kMagic;
  header->version = kVersion;
  header->ranks = static_cast<uint32_t>(layout.ranks);
  header->slot_bytes = layout.slot_bytes;
  header->total_bytes = layout.total_bytes();
  new (base + Layout::abort_offset()) AbortBlock{};
  auto* lines = reinterpret_cast<RankLine*>(base + Layout::lines_offset());
  for (int r = 0; r < layout.ranks; ++r) new (lines + r) RankLine{};
  auto* posts = reinterpret_cast<PostEntry*>(base + layout.posts_offset());
  // Round 0, which no operation has: no entry holds a round yet.
  for (size_t i = 0; i < static_cast<size_t>(layout.ranks) * kPostDepth; ++i) new (posts + i) PostEntry{};
  return seg;
}

// Other ranks: maps the segment rank 0 announced and checks that it is what
// rank 0 said it is.
ShmSegment open_segment(const std::string& name, const Layout& layout) {
  ShmSegment seg = ShmSegment::open(name, layout.total_bytes());
  const auto* h = static_cast<const Header*>(seg.data());
  if (h->magic != kMagic || h->version != kVersion || h->ranks != static_cast<uint32_t>(layout.ranks) ||
      h->slot_bytes != layout.slot_bytes || h->total_bytes != layout.total_bytes())
    throw DistBackendError("shared memory segment " + name + " does not hold the expected arena (" +
                           std::to_string(layout.ranks) + " ranks, slots of " + std::to_string(layout.slot_bytes) +
                           " bytes)");
  return seg;
}

// A set-up that fails midway (a rank died or did not come) may leave in
// /dev/shm the segment of a creator that died before unlinking it: the
// ranks that see the failure remove what provably dead processes left.
class SweepIfSetupFails {
 public:
  ~SweepIfSetupFails() {
    if (std::uncaught_exceptions() <= unwinding_) return;
    try {
      remove_segments_of_dead_processes();
    } catch (...) {  // the error being thrown is the one to report
    }
  }

 private:
  int unwinding_ = std::uncaught_exceptions();
};

}  // namespace

Signature signature(OpCode code, int dtype, int reduce_op, int root, uint64_t size) {
  // 8 bits each for op code, dtype + 1 and reduce op + 1 (0: not applicable), root + 1 above.
  uint64_t what = static_cast<uint64_t>(code) | static_cast<uint64_t>(dtype + 1) << 8 |
                  static_cast<uint64_t>(reduce_op + 1) << 16 | static_cast<uint64_t>(root + 1) << 32;
  return {what, size};
}

std::unique_ptr<HostSegment> HostSegment::setup(Store& store, Transport& transport, const std::string& label,
                                    const std::vector<int>& global_ranks, Millis timeout) {
  const int n = transport.size();
  const int rank = transport.rank();
  if (n < 2) return nullptr;  // nothing to share
  // Whether every rank is on this host is the same answer on every rank (host
  // ids are compared), so deciding it here needs no agreement.
  for (int r = 0; r < n; ++r)
    if (!transport.same_host(r)) return nullptr;
  // TDIST_SHM may differ between ranks: it is one more thing they agree on below.
  const bool enabled = shm_enabled();
  const std::string off = "TDIST_SHM=0 on rank " + std::to_string(rank);

  SweepIfSetupFails sweep_if_setup_fails;
  ShmSegment seg;
  Layout layout = Layout::for_group(n, requested_slot_bytes());
  // One copy's sizes: the narrowest of the ranks' ranges (rank 0 announces its own with the segment).
  SingleCopyRange single_copy = SingleCopyRange::from_settings();
  const std::string my_single_copy = single_copy.text();
  // Each rank's outcome: "+" (mapped), or "-" and why not ("-" alone: because rank 0 failed).
  std::vector<std::string> outcomes(1);
  if (rank == 0) {
    std::string announce;
    if (!enabled) {
      outcomes[0] = "-" + off;
    } else {
      try {
        seg = create_segment(layout);
        outcomes[0] = "+";
        announce = "+" + std::to_string(layout.slot_bytes) + "/" + my_single_copy + " " + seg.name();
        const auto pause = settings::get<"TDIST_TEST_SHM_CREATE_PAUSE_MS">();
        if (pause.count() > 0) std::this_thread::sleep_for(pause);
      } catch (const std::exception& e) {
        outcomes[0] = std::string("-rank 0: ") + e.what();
      }
    }
    store.set(kSegmentKey, announce.empty() ? outcomes[0] : announce);
  } else {
    store.wait({kSegmentKey}, timeout);
    std::string announce = store.get(kSegmentKey);
    std::string mine = "+" + my_single_copy;
    if (announce.empty() || announce[0] != '+') {
      outcomes[0] = announce.empty() ? "-" : announce;
      mine = "-";
    } else if (!enabled) {
      outcomes[0] = "+";
      mine = "-" + off;
    } else {
      outcomes[0] = "+";
      try {
        size_t space = announce.find(' ');
        size_t slash = announce.find('/');
        layout.slot_bytes = std::stoull(announce.substr(1, slash - 1));
        single_copy = single_copy.narrowed(SingleCopyRange::parse(announce.substr(slash + 1, space - slash - 1)));
        seg = open_segment(announce.substr(space + 1), layout);
      } catch (const std::exception& e) {
        mine = "-rank " + std::to_string(rank) + ": " + e.what();
      }
    }
    store.set(status_key(rank), mine);
  }

  // Everyone learns everyone's outcome, so that all use the segment or none does.
  std::vector<std::string> keys;
  for (int r = 1; r < n; ++r) keys.push_back(status_key(r));
  store.wait(keys, timeout);
  for (auto& o : store.multi_get(keys)) outcomes.push_back(std::move(o));
  // Every rank that maps the segment has mapped it by now: the name can go.
  // Each of them removes it, so that it goes even if its creator dies now.
  seg.remove_name();
  // Rank 0 returns last: its process usually serves the store, and a rank 0
  // that went on, finished its work and exited while another rank was still
  // reading these keys would leave that rank with a closed store connection.
  std::vector<std::string> read_keys;
  for (int r = 1; r < n; ++r) read_keys.push_back(read_key(r));
  if (rank == 0) {
    store.wait(read_keys, timeout);
    // Every rank has read what it needs: the set-up keys go, so that groups
    // made and destroyed by the hundred leave nothing in the store.
    // (FileStore cannot delete, as torch's cannot: its keys stay.)
    try {
      store.delete_key(kSegmentKey);
      for (int r = 1; r < n; ++r) {
        store.delete_key(status_key(r));
        store.delete_key(read_key(r));
      }
    } catch (const DistError&) {
    }
  } else {
    store.set(read_key(rank), "1");
  }
  if (std::all_of(outcomes.begin(), outcomes.end(), [](const std::string& o) { return !o.empty() && o[0] == '+'; })) {
    // Every rank but 0 said "+<its range>"; rank 0's came with the segment.
    for (size_t r = 1; r < outcomes.size(); ++r) {
      try {
        single_copy = single_copy.narrowed(SingleCopyRange::parse(outcomes[r].substr(1)));
      } catch (const std::exception&) {
        single_copy.bytes = 0;
      }
    }
    return std::unique_ptr<HostSegment>(
        new HostSegment(std::move(seg), layout, rank, global_ranks, label, single_copy));
  }
  // A full /dev/shm may be full of what dead processes left.
  if (enabled) remove_segments_of_dead_processes();
  if (rank == 0) {
    std::string why;
    bool chosen = true;  // turning shared memory off is a choice, not a problem
    for (const auto& o : outcomes) {
      if (o.size() < 2 || o[0] != '-') continue;
      why += (why.empty() ? "" : "; ") + o.substr(1);
      chosen = chosen && o.rfind("-TDIST_SHM=0", 0) == 0;
    }
    TDIST_LOG(chosen ? LogLevel::Info : LogLevel::Warn,
              label << ": collectives use the transport, not shared memory: " << why);
  }
  return nullptr;
}

SingleCopyRange SingleCopyRange::from_settings() {
  const auto max = static_cast<size_t>(settings::get<"TDIST_SHM_SINGLE_COPY_MAX_BYTES">());
  return {static_cast<size_t>(settings::get<"TDIST_SHM_SINGLE_COPY_BYTES">()), max == 0 ? SIZE_MAX : max};
}

SingleCopyRange SingleCopyRange::parse(const std::string& text) {
  const size_t dash = text.find('-');
  if (dash == std::string::npos) throw std::invalid_argument("no '-' in a one-copy range: " + text);
  return {std::stoull(text.substr(0, dash)), std::stoull(text.substr(dash + 1))};
}

HostSegment::HostSegment(ShmSegment segment, Layout layout, int rank, std::vector<int> global_ranks, std::string label,
                         SingleCopyRange single_copy)
    : segment_(std::move(segment)),
      layout_(layout),
      rank_(rank),
      size_(layout.ranks),
      global_ranks_(std::move(global_ranks)),
      label_(std::move(label)),
      base_(static_cast<char*>(segment_.data())),
      abort_(reinterpret_cast<AbortBlock*>(base_ + Layout::abort_offset())),
      lines_(reinterpret_cast<RankLine*>(base_ + Layout::lines_offset())),
      posts_(reinterpret_cast<PostEntry*>(base_ + layout.posts_offset())) {
  // Polling pays while the awaited rank is about to arrive: a futex wake-up
  // costs the waker a syscall and the sleeper several microseconds. Pure
  // polling only while every rank can have a core: with more ranks than cores
  // (4 or 8 on 2) it would spin on the core the awaited rank needs, so then
  // the waiter yields between polling bursts (rounds.cpp) from the start, which
  // hands the core over and keeps the same overall budget worthwhile
  // (docs/tuning_log.md: Shared-memory engine).
  // Counted over the machine: other hosts' ranks (namespaces, containers) share its cores.
  const int ranks = std::max(size_, ranks_on_machine());
  const bool oversubscribed = static_cast<unsigned>(ranks) > std::max(1u, std::thread::hardware_concurrency());
  oversubscribed_ = oversubscribed;
  post_bytes_ = layout_.post_bytes();
  poll_only_ = std::chrono::microseconds(oversubscribed ? 0 : 10);
  spin_ = settings::get<"TDIST_SHM_SPIN_US">();
  one_round_bytes_ = static_cast<size_t>(settings::get<"TDIST_SHM_ONE_ROUND_BYTES">());
  single_copy_ = single_copy;
  test_read_fails_ = settings::get<"TDIST_TEST_SHM_SINGLE_COPY_FAIL">();
  // The registry checked the values and spells them as their choices do.
  const std::string_view fold = settings::get<"TDIST_SHM_TWO_RANK_ALL_REDUCE">();
  two_rank_all_reduce_.told = fold == "SHARES" ? 0 : fold == "IN_PLACE" ? 1 : RankZeroChoice::kTimed;
  const std::string_view blocks = settings::get<"TDIST_SHM_LARGE_BLOCKS">();
  all_gather_blocks_.told = blocks == "ONE_COPY" ? 0 : blocks == "SEGMENT" ? 1 : RankZeroChoice::kTimed;
  all_to_all_blocks_.told = all_gather_blocks_.told;
  // Before this rank's first arrival: a peer may read this process from its first operation on.
  if (single_copy_.bytes != 0) allow_reads_by_peers();
  round_ = confirmed_ = lines_[rank_].round.load(std::memory_order_relaxed);
  round64_ = round_;
  const ProcessIdentity me = this_process();
  lines_[rank_].started.store(me.started, std::memory_order_relaxed);
  lines_[rank_].pid_ns.store(me.pid_ns, std::memory_order_relaxed);
  lines_[rank_].pid.store(me.pid, std::memory_order_release);
}

HostSegment::~HostSegment() = default;

void HostSegment::propose_as_rank_zero(uint32_t round, RankZeroChoice& choice, size_t bytes) {
  choice.bytes = bytes;
  choice.now = choice.times.pick(bytes);
  line(rank_).word[round & 1].store(static_cast<uint64_t>(choice.now.way) | kPickTimed, std::memory_order_relaxed);
}

void HostSegment::record_last_call(uint32_t round, RankZeroChoice& choice) {
  // A part longer than an hour is no time of ours (a rank that wrote its word wrong).
  constexpr uint64_t kHourNs = uint64_t{3600} * 1000 * 1000 * 1000;
  uint64_t longest = static_cast<uint64_t>(choice.last_ns);
  bool all = true;
  for (int q = 1; q < size_; ++q) {
    const uint64_t ns = word(round, q);
    all = all && ns != 0 && ns < kHourNs;
    longest = std::max(longest, ns);
  }
  if (all && choice.last.counts && choice.last_bytes != 0)
    choice.times.record(choice.last_bytes, choice.last.way, std::chrono::nanoseconds(longest));
  choice.last_ns = 0;
}

std::string HostSegment::read_block(int r, uint32_t round, void* out) const {
  uint64_t where[2];
  std::memcpy(where, slot(round, r), sizeof where);
  return read_from(r, reinterpret_cast<const void*>(static_cast<uintptr_t>(where[0])), out,
                   static_cast<size_t>(where[1]));
}

std::string HostSegment::read_from(int r, const void* remote, void* out, size_t n) const {
  if (n == 0) return "";
  if (test_read_fails_) return "TDIST_TEST_SHM_SINGLE_COPY_FAIL is set";
  const RankLine& l = lines_[r];
  // A pid means nothing in another pid namespace (and may name another process there).
  if (l.pid_ns.load(std::memory_order_relaxed) != lines_[rank_].pid_ns.load(std::memory_order_relaxed))
    return describe_rank(r) + " runs in another pid namespace";
  return read_peer_memory(l.pid.load(std::memory_order_acquire), remote, out, n);
}

bool HostSegment::all_read(CollectiveContext& ctx, const std::string& why) {
  const uint32_t r = next_round(ctx);
  const uint64_t ok = why.empty() ? 1 : 0;
  put_word(r, &ok, sizeof ok);
  sync(ctx);
  bool all = true;
  for (int q = 0; q < size_; ++q) all = all && word(r, q) == 1;
  if (all) return true;
  single_copy_.bytes = 0;
  if (!why.empty())
    TDIST_LOG(LogLevel::Info, label_ << ": shared-memory collectives copy through the segment from now on: rank "
                                     << global_ranks_[rank_] << " cannot read another rank's memory (" << why << ")");
  return false;
}

bool HostSegment::process_gone(int r) const {
  const RankLine& l = lines_[r];
  ProcessIdentity owner;
  owner.pid = l.pid.load(std::memory_order_acquire);
  owner.started = l.started.load(std::memory_order_relaxed);
  owner.pid_ns = l.pid_ns.load(std::memory_order_relaxed);
  return liveness(owner) == Liveness::Gone;
}

void HostSegment::wake_all() {
  for (int r = 0; r < size_; ++r) futex_wake(&lines_[r].round);
}

void HostSegment::leave() {
  RankLine& me = line(rank_);
  me.left.store(1, std::memory_order_seq_cst);
  // Waiters sleep on this rank's counter: wake them to read the goodbye now.
  futex_wake(&me.round);
}

}  // namespace tdist::shm_engine
