// The engine builder: a group's engines from its shape.
#include "engines/engine_builder.h"

#include <algorithm>

#include "engines/traced_engine.h"
#include "shm_engine/host_segment.h"
#include "trace/timeline.h"
#include "util/settings.h"

namespace tdist {

std::unique_ptr<GroupEngines> EngineBuilder::build(const GroupShape& shape) {
  std::unique_ptr<GroupEngines> engines(new GroupEngines());
  engines->forced_ = ForcedAlgorithms::from_environment();
  Transport& transport = *shape.transport;
  engines->size_ = transport.size();
  engines->segment_ = shm_engine::HostSegment::setup(*shape.store, transport, shape.label, shape.global_ranks,
                                               shape.timeout);
  if (engines->segment_) engines->shm_ = make_shm_engine(*engines->segment_);
  const std::vector<std::vector<int>> hosts = ranks_by_host(transport);
  engines->placement_.hosts = static_cast<int>(hosts.size());
  for (const auto& ranks : hosts) {
    engines->placement_.ranks_per_host = std::max(engines->placement_.ranks_per_host, static_cast<int>(ranks.size()));
    engines->uniform_ = engines->uniform_ && ranks.size() == hosts[0].size();
  }
  if (shape.agree_ids && shape.open && engines->placement_.hosts > 1 && engines->placement_.ranks_per_host > 1 &&
      settings::get<"TDIST_HIERARCHICAL">())
    add_hierarchy(*engines, shape, hosts);
  return engines;
}

// Two communicators per rank over the shared connections: the ranks of its
// host, and the ranks of its local index on every host. Their ids come in one
// block: one per host, then one per local index.
void EngineBuilder::add_hierarchy(GroupEngines& engines, const GroupShape& shape,
                                  const std::vector<std::vector<int>>& hosts) {
  const std::vector<int>& globals = shape.global_ranks;
  const int rank = shape.transport->rank();
  size_t my_host = 0, widest = 0;
  int my_index = 0;
  for (size_t h = 0; h < hosts.size(); ++h) {
    widest = std::max(widest, hosts[h].size());
    auto at = std::find(hosts[h].begin(), hosts[h].end(), rank);
    if (at != hosts[h].end()) {
      my_host = h;
      my_index = static_cast<int>(at - hosts[h].begin());
    }
  }
  const uint32_t first = shape.agree_ids("hierarchy_comm_id", static_cast<int>(hosts.size() + widest));
  std::vector<int> local_links, cross_links;
  for (int r : hosts[my_host]) local_links.push_back(globals[r]);
  int cross_rank = 0;
  for (const auto& members : hosts) {
    if (members.size() <= static_cast<size_t>(my_index)) continue;
    if (members[my_index] == rank) cross_rank = static_cast<int>(cross_links.size());
    cross_links.push_back(globals[members[my_index]]);
  }
  engines.local_ = shape.open(first + static_cast<uint32_t>(my_host), local_links, my_index);
  engines.cross_ = shape.open(first + static_cast<uint32_t>(hosts.size() + my_index), cross_links, cross_rank);
  PrefixStore host_store("hierarchy/host" + std::to_string(my_host) + "/", shape.store);
  engines.host_segment_ = shm_engine::HostSegment::setup(host_store, *engines.local_, shape.label + " (inside its host)",
                                                   local_links, shape.timeout);
  if (engines.host_segment_) engines.host_shm_ = make_shm_engine(*engines.host_segment_);
  engines.host_members_ = hosts[my_host];
  HostSplit split;
  split.hosts = hosts;
  split.host = static_cast<int>(my_host);
  split.local = engines.local_;
  split.cross = engines.cross_;
  split.local_engine = engines.host_shm_ ? engines.host_shm_.get() : &transport_engine();
  split.cross_engine = &transport_engine();
  if (trace::timeline_on()) {
    engines.traced_local_ = make_traced_engine(*split.local_engine, shape.name, "inside host");
    engines.traced_cross_ = make_traced_engine(transport_engine(), shape.name, "among hosts");
    split.local_engine = engines.traced_local_.get();
    split.cross_engine = engines.traced_cross_.get();
  }
  split.uniform = engines.uniform_;
  split.local_placement = Placement{1, static_cast<int>(local_links.size())};
  split.cross_placement = Placement{static_cast<int>(cross_links.size()), 1};
  engines.hierarchical_ = make_hierarchical_engine(std::move(split));
}

}  // namespace tdist
