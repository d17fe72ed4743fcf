// An engine runs whole collectives for one group: the transport engine as
// algorithms over messages (src/algorithms), the shared-memory engine in a
// segment every rank of one host maps (src/shm_engine), the hierarchical
// engine as steps inside each host and among hosts. The engine builder
// (engine_builder.h) assembles a group's engines when the group is made; at
// each call the selector decides the engine and its algorithm once
// (GroupEngines::decide) and the call runs in that engine with the decision
// in its context. A new way to run collectives is a new Engine, not a branch
// in every operation. Docs: docs/algorithms.md (the table of collective,
// engine and algorithm), docs/architecture.md.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "algorithms/collective.h"
#include "trace/engine_kind.h"

namespace tdist {

namespace shm_engine {
class HostSegment;
}

class Engine {
 public:
  virtual ~Engine() = default;
  // Which engine this is (trace/engine_kind.h): what traces and the selector's decisions name.
  virtual EngineKind kind() const = 0;
  const char* name() const { return engine_kind_name(kind()); }
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

// The algorithms over the transport: the one the call's decision names, else
// (a step of another engine) the one the selector picks for the step.
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
  Engine* cross_engine = nullptr;    // runs the steps among hosts: the transport engine (traced or not)
  bool uniform = false;              // every host holds as many of the group's ranks
  Placement local_placement;         // one host
  Placement cross_placement;         // one rank per host
};
std::unique_ptr<Engine> make_hierarchical_engine(HostSplit split);

}  // namespace tdist
