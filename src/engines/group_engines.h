// The engines of one group, as the engine builder (engine_builder.h)
// assembled them when the group was made, and the one question a backend
// asks at each call: which engine and algorithm (decide), then the engine
// of that decision (engine). It owns the group's shared-memory segments and
// the hierarchical engine's communicators, and takes part in the group's
// failure and shutdown (abort, close, leave).
#pragma once

#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "algorithms/selector.h"
#include "engines/engine.h"

namespace tdist {

namespace shm_engine {
class HostSegment;
}

// A call's size as its collective counts it (selector.h: bytes per pick).
struct CallSize {
  size_t bytes = 0;
  size_t count = 0;          // elements, for the collectives whose picks look at them
  bool equal_blocks = true;  // every rank's block has one size (lists of blocks)
  bool even_split = false;   // ... on every rank, as the call says (Shape::even_split)
};

class GroupEngines;
// A call's decision and the engine it names, as a backend hands them to the
// call's body.
struct EngineCall {
  Engine* engine = nullptr;
  Decision decision;
};

class GroupEngines {
 public:
  ~GroupEngines();
  GroupEngines(const GroupEngines&) = delete;
  GroupEngines& operator=(const GroupEngines&) = delete;

  // The one decision of a call: the engine and its algorithm (selector.h,
  // decide). The same on every rank: it reads only what all ranks share.
  Decision decide(OpCode code, CallSize call) const {
    // What tdist::decide answers for a group on one host with its segment,
    // unless an algorithm is forced: shared memory, whatever the size. Here,
    // without building the shape: this is on the path of every small call.
    if (shm_ != nullptr && placement_.hosts == 1 && forced_.of(code) == ForcedAlgorithms::kNone)
      return Decision{.engine = EngineKind::SharedMemory};
    Shape s{call.bytes,        call.count, size_,          placement_.hosts, placement_.ranks_per_host,
            call.equal_blocks, uniform_,   call.even_split};
    return tdist::decide(code, s, forced_, {shm_ != nullptr, hierarchical_ != nullptr});
  }
  // The engine a decision names.
  Engine& engine(const Decision& d) const {
    if (d.engine == EngineKind::SharedMemory && shm_) return *shm_;
    if (d.engine == EngineKind::Hierarchical && hierarchical_) return *hierarchical_;
    return transport_engine();
  }

  // Both at once.
  EngineCall call(OpCode code, CallSize size) const {
    const Decision d = decide(code, size);
    return {&engine(d), d};
  }

  const ForcedAlgorithms& forced() const { return forced_; }
  const Placement& placement() const { return placement_; }

  // Whether the process of group rank `r` is proven gone from this host
  // (its line in a shared-memory segment names a process that has exited):
  // false when no segment of this group holds it, or it cannot tell.
  bool process_gone(int r) const;

  // The group failed: every segment's waiters fail now, saying `why`, and
  // the hierarchical engine's communicators abort.
  void abort(const std::string& why);
  // Only the first part: the segments' waiters (this host's ranks) fail now,
  // saying `why`. Nothing goes over a connection.
  void abort_segments(const std::string& why);
  // Wakes the waiters of every segment (they re-check the group's state).
  void wake_all();
  // The group is being destroyed: closes the hierarchical engine's
  // communicators (before the group's transport closes) ...
  void close(const std::exception_ptr& why);
  // ... and then says goodbye in every segment, waking its waiters.
  void leave();

 private:
  friend class EngineBuilder;
  GroupEngines() = default;

  ForcedAlgorithms forced_;  // TDIST_ALGO_*, checked when the group was made
  Placement placement_;      // hosts and ranks per host, counted when the group was made
  int size_ = 1;
  bool uniform_ = true;  // every host holds as many of the group's ranks
  std::unique_ptr<shm_engine::HostSegment> segment_;  // null: the group has no shared-memory segment
  std::unique_ptr<Engine> shm_;                 // over segment_
  // A group that spans hosts with several ranks on some: the communicators
  // inside this host and among the hosts, this host's segment, and the
  // hierarchical engine over them.
  std::shared_ptr<Transport> local_, cross_;
  std::unique_ptr<shm_engine::HostSegment> host_segment_;  // null: a host of one rank, or no shared memory
  std::vector<int> host_members_;  // host_segment_'s ranks, as group ranks
  std::unique_ptr<Engine> host_shm_;
  // With a timeline (TDIST_TRACE): the hierarchical engine's step engines,
  // each call traced (traced_engine.h); declared before it, destroyed after.
  std::unique_ptr<Engine> traced_local_, traced_cross_;
  std::unique_ptr<Engine> hierarchical_;
};

}  // namespace tdist
