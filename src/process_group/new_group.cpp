// new_group and destroy_process_group: groups over subsets of the default group.
#include <algorithm>
#include <numeric>
#include <set>

#include "tdist/distributed.h"
#include "tdist/errors.h"
#include "backends/mpi_launch.h"
#include "process_group/world.h"

namespace tdist {

// "group(0,2,3)#1": the members and how many groups of the same members were
// made before. Every member computes the same name without talking to anyone.
std::string new_group_name(const std::vector<int>& ranks, int index) {
  std::string list;
  if (ranks.size() <= 16) {
    for (size_t i = 0; i < ranks.size(); ++i) {
      if (i) list += ',';
      list += std::to_string(ranks[i]);
    }
  } else {
    uint64_t h = 1469598103934665603ull;  // FNV-1a over the member list
    for (int r : ranks) h = (h ^ static_cast<uint64_t>(r)) * 1099511628211ull;
    list = std::to_string(ranks.size()) + " ranks, " + std::to_string(h);
  }
  return "group(" + list + ")#" + std::to_string(index);
}

Group new_group(const std::vector<int>& ranks_in, std::chrono::milliseconds timeout, const std::string& backend,
                bool use_local_synchronization, const std::string& group_desc) {
  Group world_group = resolve_group(nullptr, "new_group");
  const int world_size = world_group->size();
  std::vector<int> ranks = ranks_in;
  if (ranks.empty()) {
    ranks.resize(world_size);
    std::iota(ranks.begin(), ranks.end(), 0);
  }
  std::sort(ranks.begin(), ranks.end());  // group rank = position in the sorted list, as torch
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] < 0 || ranks[i] >= world_size)
      throw DistValueError("new_group: rank " + std::to_string(ranks[i]) + " is outside the default group (size " +
                           std::to_string(world_size) + ")");
    if (i > 0 && ranks[i] == ranks[i - 1])
      throw DistValueError("new_group: rank " + std::to_string(ranks[i]) + " is listed twice");
  }
  std::shared_ptr<Store> store;
  int index;
  {
    std::lock_guard<std::mutex> lock(world().mu);
    store = world().scoped_store;
    std::string key;
    for (int r : ranks) key += std::to_string(r) + ",";
    index = world().group_counts[key]++;
    ++world().pg_count;
  }
  ProcessGroupOptions options;
  if (!group_desc.empty()) options.group_desc = group_desc;
  options.backend = backend.empty() ? world_group->backend_name() : backend;
  options.timeout = timeout;
  options.group_name = new_group_name(ranks, index);
  options.global_ranks = ranks;
  options.parent = world_group;
  options.device_id = world_group->device_id();
  for (int r : ranks) options.launch_ranks.push_back(world_group->launch_ranks().at(r));
  options.death_records = world_group->death_records();
  auto it = std::find(ranks.begin(), ranks.end(), world_group->rank());
  Group g;
  if (it == ranks.end()) {
    g = ProcessGroup::non_member(ranks, options);
  } else {
    g = std::make_shared<ProcessGroup>(store, static_cast<int>(it - ranks.begin()), static_cast<int>(ranks.size()),
                                       options);
  }
  {
    std::lock_guard<std::mutex> lock(world().mu);
    world().groups.push_back(g);
  }
  // As torch: every rank of the default group returns only once the members
  // have set the group up. Besides keeping the ranks together, this keeps a
  // non-member rank 0, whose process usually serves the store, from finishing
  // and exiting while the members still read the store. The barrier runs over
  // the default group's backend (not the store, which that exit would break).
  if (!use_local_synchronization) world_group->barrier()->wait();
  return g;
}

Group split_group(const Group& parent_group, const std::vector<std::vector<int>>& split_ranks,
                  std::chrono::milliseconds timeout, const std::string& group_desc) {
  const char* op = "split_group";
  Group world_group = resolve_group(nullptr, op);
  Group parent = parent_group ? parent_group : world_group;
  if (!parent->is_member())
    throw DistValueError(std::string(op) + ": global rank " + std::to_string(world_group->rank()) +
                         " is not a member of the parent group " + parent->group_name() +
                         " (only its members call split_group)");
  const int parent_size = parent->size();
  const int me = parent->rank();
  // Checked whole before anything is made, so that every rank (all see the
  // same lists) fails alike and the groups stay as they were.
  std::set<int> seen;
  std::vector<int> mine;
  for (size_t k = 0; k < split_ranks.size(); ++k) {
    std::vector<int> ranks = split_ranks[k];
    const std::string which = "split_ranks[" + std::to_string(k) + "]";
    if (ranks.empty()) throw DistValueError(std::string(op) + ": " + which + " is empty");
    std::sort(ranks.begin(), ranks.end());
    for (size_t i = 0; i < ranks.size(); ++i) {
      if (ranks[i] < 0 || ranks[i] >= parent_size)
        throw DistValueError(std::string(op) + ": " + which + " names rank " + std::to_string(ranks[i]) +
                             ", outside the parent group " + parent->group_name() + " (size " +
                             std::to_string(parent_size) + "; ranks are the parent's group ranks)");
      if (i > 0 && ranks[i] == ranks[i - 1])
        throw DistValueError(std::string(op) + ": " + which + " lists rank " + std::to_string(ranks[i]) + " twice");
      if (!seen.insert(ranks[i]).second)
        throw DistValueError(std::string(op) + ": rank " + std::to_string(ranks[i]) + " is in " + which +
                             " and an earlier list; the splits must not overlap");
    }
    if (std::binary_search(ranks.begin(), ranks.end(), me)) mine = ranks;
  }
  Group g;
  if (!mine.empty()) {
    std::vector<int> globals;
    for (int r : mine) globals.push_back(parent->global_rank(r));
    std::shared_ptr<Store> store;
    int index;
    {
      std::lock_guard<std::mutex> lock(world().mu);
      store = world().scoped_store;
      std::string key = "split:";
      for (int r : globals) key += std::to_string(r) + ",";
      index = world().group_counts[key]++;
      ++world().pg_count;
    }
    ProcessGroupOptions options;
    if (!group_desc.empty()) options.group_desc = group_desc;
    options.backend = parent->backend_name();
    options.timeout = timeout;
    // Every member counts the splits that made its member list alike (all of
    // them are members of each such call's parent): the same name everywhere.
    options.group_name = "split_" + new_group_name(globals, index);
    options.global_ranks = globals;
    options.parent = parent;
    options.device_id = parent->device_id();
    const int rank = static_cast<int>(std::find(mine.begin(), mine.end(), me) - mine.begin());
    g = std::make_shared<ProcessGroup>(store, rank, static_cast<int>(mine.size()), options);
    std::lock_guard<std::mutex> lock(world().mu);
    world().groups.push_back(g);
  }
  // Every rank of the parent returns once all groups are made, as new_group
  // does over the default group (a rank in no split waits too: torch's
  // no-color split).
  parent->barrier()->wait();
  return g;
}

std::pair<Group, std::vector<Group>> new_subgroups_by_enumeration(
    const std::vector<std::vector<int>>& ranks_per_subgroup, std::chrono::milliseconds timeout,
    const std::string& backend) {
  if (ranks_per_subgroup.empty()) throw DistValueError("new_subgroups_by_enumeration: no subgroup is listed");
  const int me = resolve_group(nullptr, "new_subgroups_by_enumeration")->rank();
  std::set<int> seen;
  for (const auto& ranks : ranks_per_subgroup)
    for (int r : ranks)
      if (!seen.insert(r).second)
        throw DistValueError("new_subgroups_by_enumeration: rank " + std::to_string(r) +
                             " is in more than one subgroup");
  std::pair<Group, std::vector<Group>> out;
  for (const auto& ranks : ranks_per_subgroup) {
    Group g = new_group(ranks, timeout, backend);
    if (std::find(ranks.begin(), ranks.end(), me) != ranks.end()) out.first = g;
    out.second.push_back(std::move(g));
  }
  return out;
}

std::pair<Group, std::vector<Group>> new_subgroups(int group_size, std::chrono::milliseconds timeout,
                                                   const std::string& backend) {
  const int world_size = resolve_group(nullptr, "new_subgroups")->size();
  if (group_size <= 0 || group_size > world_size || world_size % group_size != 0)
    throw DistValueError("new_subgroups: group_size " + std::to_string(group_size) +
                         " must be positive and divide the world size " + std::to_string(world_size));
  std::vector<std::vector<int>> lists(world_size / group_size);
  for (int r = 0; r < world_size; ++r) lists[r / group_size].push_back(r);
  return new_subgroups_by_enumeration(lists, timeout, backend);
}

namespace {

constexpr std::chrono::milliseconds kLeaveWait{10000};

// Leaving in order, when init made the store: rank 0, whose process serves
// it, waits (kLeaveWait at most, and at most the group's timeout) until every
// rank has left, stops accepting, says so, and closes it. A rank that goes on
// to init again on the same port then never reaches the closing store, and no
// group handle keeps the port bound.
// The other ranks say they left and go on at once: rank 0 may be busy for
// long (in an operation its peers left, which the goodbyes fail at once, or
// in work of its own), and a rank that leaves early must not wait for it.
// Returns false when this rank left a TCPStore without seeing it closed: the
// next init waits for that (await_previous_store_close), or it could join the
// old server just before rank 0 closes it.
bool leave_store(Store& scoped, TCPStore* hosted, int rank, int size, std::chrono::milliseconds timeout) {
  const std::chrono::milliseconds wait = std::min(kLeaveWait, timeout);
  try {
    if (rank == 0) {
      std::vector<std::string> keys;
      for (int r = 1; r < size; ++r) keys.push_back("left/" + std::to_string(r));
      try {
        if (!keys.empty()) scoped.wait(keys, wait);
      } catch (const DistError&) {
        // A rank that never left (exited, crashed) does not hold rank 0.
      }
      if (hosted) hosted->stop_accepting();
      scoped.set("closed", "1");
      if (hosted) hosted->stop_server();
    } else {
      scoped.set("left/" + std::to_string(rank), "1");
      return scoped.check({"closed"});  // usually not yet: rank 0 closes once every rank has left
    }
  } catch (const DistError&) {
    // Leaving never fails: the store may be gone already.
  }
  return true;
}

}  // namespace

void await_previous_store_close(std::chrono::milliseconds timeout) {
  std::shared_ptr<Store> old;
  std::chrono::milliseconds grace{0};
  {
    std::lock_guard<std::mutex> lock(world().mu);
    old = std::move(world().unclosed_store);
    world().unclosed_store = nullptr;
    grace = world().unclosed_grace;
  }
  if (!old) return;
  try {
    old->wait({"closed"}, timeout + grace);
  } catch (const DistError&) {
    // Closed under us (a network error), or never said so: go on either way.
  }
}

void destroy_process_group(const Group& group) {
  std::vector<Group> victims;
  std::shared_ptr<Store> store, scoped;
  std::shared_ptr<void> mpi_hold;
  bool owns_store = false;
  int rank = 0, size = 1;
  std::chrono::milliseconds timeout = kLeaveWait;
  {
    std::lock_guard<std::mutex> lock(world().mu);
    if (group && group != world().default_group) {
      auto& gs = world().groups;
      gs.erase(std::remove(gs.begin(), gs.end(), group), gs.end());
      victims.push_back(group);
    } else {
      if (!world().default_group)
        throw DistError("destroy_process_group: the default process group is not initialized");
      victims = std::move(world().groups);
      world().groups.clear();
      world().group_counts.clear();
      world().pg_count = 0;
      rank = world().default_group->rank();
      size = world().default_group->size();
      timeout = world().default_group->timeout();
      store = std::move(world().store);
      scoped = std::move(world().scoped_store);
      owns_store = world().owns_store;
      mpi_hold = std::move(world().mpi_hold);
      victims.push_back(std::move(world().default_group));
      world().default_group = nullptr;
      world().default_version.fetch_add(1, std::memory_order_release);
      world().scoped_store = nullptr;
      world().store = nullptr;
    }
  }
  for (auto& g : victims) g->shutdown();
  if (owns_store && scoped && !leave_store(*scoped, dynamic_cast<TCPStore*>(store.get()), rank, size, timeout) &&
      dynamic_cast<TCPStore*>(store.get()) != nullptr) {
    std::lock_guard<std::mutex> lock(world().mu);
    world().unclosed_store = scoped;
    world().unclosed_grace = std::min(kLeaveWait, timeout);
  }
  // Last: MPI is finalised here if tdist initialised it and no group holds it.
  if (mpi_hold) {
    mpi_hold.reset();
    let_go_of_mpi();
  }
}

}  // namespace tdist
