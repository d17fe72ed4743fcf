// An engine runs whole collectives for one group: the transport engine as
// algorithms over messages (src/algorithms), the shared-memory engine in a
// segment every rank of one host maps (src/shm_engine). A backend picks one engine
// at each call (GroupEngines::pick, by the selector's pick_engine) and hands
// the call to it; a new way to run collectives (a hierarchical engine: a step inside
// each host, one among hosts, one inside each host again) is a new Engine,
// not a branch in every operation. Docs: docs/algorithms.md (the table of
// collective, engine and algorithm), docs/architecture.md.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "algorithms/collective.h"

namespace tdist {

namespace shm_engine {
class HostSegment;
}

class Engine {
 public:
  virtual ~Engine() = default;
  virtual const char* name() const = 0;
  virtual void broadcast(CollectiveContext& ctx, const Tensor& t, int root) = 0;
  virtual void all_reduce(CollectiveContext& ctx, const Tensor& t, ReduceOp op) = 0;
  virtual void barrier(CollectiveContext& ctx) = 0;
  virtual void reduce(CollectiveContext& ctx, const Tensor& t, int root, ReduceOp op) = 0;
  virtual void all_gather(CollectiveContext& ctx, const std::vector<Tensor>& outputs, const Tensor& input) = 0;
  virtual void gather(CollectiveContext& ctx, const std::vector<Tensor>& outputs, const Tensor& input, int root) = 0;
  virtual void scatter(CollectiveContext& ctx, const Tensor& output, const std::vector<Tensor>& inputs, int root) = 0;
  virtual void reduce_scatter(CollectiveContext& ctx, const Tensor& output, const std::vector<Tensor>& inputs,
                              ReduceOp op) = 0;
  virtual void all_to_all(CollectiveContext& ctx, const std::vector<Tensor>& outputs,
                          const std::vector<Tensor>& inputs) = 0;
};

// The algorithms over the transport, each picked by the selector (or forced
// by TDIST_ALGO_<COLLECTIVE>) at every call.
Engine& transport_engine();
// The collectives of a group's shared-memory segment.
std::unique_ptr<Engine> make_shm_engine(shm_engine::HostSegment& arena);

// A group that spans hosts, as this rank's hierarchical engine sees it.
struct HostSplit {
  std::vector<std::vector<int>> hosts;  // ranks_by_host() of the group
  int host = 0;                         // this rank's host: an index into `hosts`
  std::shared_ptr<Transport> local;  // the group's ranks on this host, in group order
  std::shared_ptr<Transport> cross;  // the rank of this local index on every host that has one, in host order
  Engine* local_engine = nullptr;    // runs the steps inside the host: shared memory, or the transport engine
  bool uniform = false;              // every host holds as many of the group's ranks
  Placement local_placement;         // one host
  Placement cross_placement;         // one rank per host
};
std::unique_ptr<Engine> make_hierarchical_engine(HostSplit split);

// The engines of one group and what the selector needs to choose among
// them at each call (algorithms/selector.h, pick_engine).
struct GroupEngines {
  Engine* shm = nullptr;           // the group's shared-memory engine, if it has one
  Engine* hierarchical = nullptr;  // the group's hierarchical engine, if it spans hosts
  Placement placement;             // where the group's ranks run
  int size = 1;
  const ForcedAlgorithms* forced = nullptr;  // TDIST_ALGO_*, by OpCode

  // The engine for `code`'s collective of `bytes` (as the collective's own
  // pick counts them: selector.h).
  Engine& pick(OpCode code, size_t bytes) const;
};

}  // namespace tdist
