// The process-wide state of torch.distributed: the default group, its store,
// and the groups made by new_group.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tdist/distributed.h"

namespace tdist {

struct World {
  std::mutex mu;
  Group default_group;
  // Bumped (under mu) whenever default_group changes; 0: never set. Lets
  // resolve_group find the default group without the mutex (see there).
  std::atomic<uint64_t> default_version{0};
  std::shared_ptr<Store> store;         // as given by the init method
  bool owns_store = false;              // made by init (tcp://, env://, file://), not given by the user
  std::shared_ptr<Store> scoped_store;  // this init's namespace in it; groups live under it
  std::vector<Group> groups;            // made by new_group, destroyed with the default group
  std::map<std::string, int> group_counts;  // per member list: how many groups were made of it
  int pg_count = 0;                         // get_pg_count: groups made since init, the default one included
  int generation = 0;
  // shrink_group attempts per group, so that each attempt has its own keys.
  std::map<const ProcessGroup*, int> shrink_attempts;
  // This process joined a running job and has not been through admit_new_ranks since.
  bool joined_running_job = false;
  // MPI kept initialised for the default group (init took its world or found
  // the store through MPI); let go by destroy_process_group.
  std::shared_ptr<void> mpi_hold;                   // how many times init_process_group ran in this process
  // The last default group's store (its namespace), when this process left it
  // (destroy_process_group, rank > 0) before rank 0 said it closed it; see
  // await_previous_store_close.
  std::shared_ptr<Store> unclosed_store;
  // How long destroy would have waited for rank 0 to close it: the next init
  // waits that long on top of its own timeout (destroy itself returns at once).
  std::chrono::milliseconds unclosed_grace{0};
};

// Inline: resolve_group reads it on every call on the default group.
inline World& world() {
  static World w;
  return w;
}
// For init_process_group, before it connects anywhere: when this process left
// the previous default group's TCPStore before rank 0 closed it (rank 0 was
// still busy in its program), waits up to `timeout` (plus the grace destroy
// left it) until rank 0 closes it, so the new group cannot reach that old
// server on a reused port.
void await_previous_store_close(std::chrono::milliseconds timeout);
// The group an operation acts on: `group`, or the default one (DistError naming
// `op` when the package is not initialized).
Group resolve_group(const Group& group, const char* op);
// A PeerRank as a rank of `g`; DistValueError naming `op` when not a member.
// Inline for the common cases, on the path of every rooted call: a group
// rank, or a global rank that is its own group rank (every rank of the
// default group).
int to_group_rank_searched(const ProcessGroup& g, PeerRank peer, const char* op, const char* what);
inline int to_group_rank(const ProcessGroup& g, PeerRank peer, const char* op, const char* what) {
  if (peer.rank >= 0 && peer.rank < g.size() && (peer.group_relative || g.global_ranks()[peer.rank] == peer.rank))
    return peer.rank;
  return to_group_rank_searched(g, peer, op, what);
}
// Operations on a group this process is not in do nothing (torch warns); true
// when the caller should return early.
bool warn_non_member(const ProcessGroup& g, const char* op);  // true
inline bool skip_non_member(const ProcessGroup& g, const char* op) {
  return !g.is_member() && warn_non_member(g, op);
}
// init_process_group's part for a process that joins a running job: waits in
// `root` (the job's store) until the members admit it (admit_new_ranks), then
// makes the group they formed its default group.
void join_running_job(const std::shared_ptr<Store>& root, int launch_rank, std::chrono::milliseconds timeout,
                      const std::optional<Device>& device_id, const std::shared_ptr<Store>& death_records);

}  // namespace tdist
