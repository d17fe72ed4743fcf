// The engine builder: assembles a group's engines from its shape when the
// group is made (its placement, its transport, the shared-memory segment of
// its host, the communicators the hierarchical engine steps over), outside
// any backend. A backend asks once and holds the GroupEngines it returns.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tdist/store.h"
#include "engines/group_engines.h"
#include "transport/transport.h"
#include "util/deadline.h"

namespace tdist {

// What the builder needs of a group.
struct GroupShape {
  std::shared_ptr<Store> store;          // the group's store
  std::shared_ptr<Transport> transport;  // the group's transport
  std::string label;                     // "rank 3 in group default_pg"
  std::string name;                      // the group's name, as timelines give it ("default_pg")
  std::vector<int> global_ranks;         // the group's ranks in the default group
  Millis timeout{};                      // for set-up
  // Where the group's transport is a communicator over the process's shared
  // connections: how to agree on `count` new communicator ids (the first of
  // them, the same on every rank; `key` names them in the group's store) and
  // open a communicator over those connections (members in default-group
  // ranks, this rank's place among them). Unset: the group has no
  // hierarchical engine.
  std::function<uint32_t(const std::string& key, int count)> agree_ids;
  std::function<std::shared_ptr<Transport>(uint32_t id, const std::vector<int>& members, int rank)> open;
};

class EngineBuilder {
 public:
  // The group's engines: the shared-memory engine where every rank is on
  // this host and the segment could be set up, the hierarchical engine where
  // the group spans hosts with several ranks on some (TDIST_HIERARCHICAL),
  // and always the transport engine. Checks TDIST_ALGO_* first
  // (DistValueError naming the setting, its value and the valid names).
  static std::unique_ptr<GroupEngines> build(const GroupShape& shape);

 private:
  static void add_hierarchy(GroupEngines& engines, const GroupShape& shape,
                            const std::vector<std::vector<int>>& hosts);
};

}  // namespace tdist
