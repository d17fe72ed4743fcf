// A group's view of the process's shared transport. Every group of a process
// (new_group, new_subgroups, each DeviceMesh dimension) talks over the
// connections, shared-memory rings and progress thread that the default
// group made; a group adds only a communicator id, carried in every message
// header, so that its messages match only its own receives and its tags never
// meet another group's. Ranks are the group's, translated both ways.
//
// A communicator fails alone. Closing it (destroy_process_group) says goodbye
// to its members; aborting it (ProcessGroup::abort, a user interrupt, a failed
// operation of its group) fails every request of it at once and tells its
// members, which fail theirs naming this rank (Mesh::abort_comm: receives under
// way are redirected to drop their payload, sends under way finish from a
// copy, so no buffer of the group is touched once abort() returns). What fails
// the shared transport is what fails a connection: a peer lost (closed, reset,
// gone from its host), a timeout (the peer may be stalled with receives of
// ours under way), a mesh-wide abort (the default group's); every group that
// talks to that peer then fails with it.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "transport/mesh.h"
#include "transport/transport.h"

namespace tdist {

class Communicator final : public Transport {
 public:
  // link_ranks[i]: the shared transport's rank of group
  // rank i; `rank` is this process's group rank; `group` the group's name,
  // for the members' errors when this rank aborts it.
  Communicator(std::shared_ptr<Mesh> shared, uint32_t comm, std::vector<int> link_ranks, int rank,
               std::string group = {});
  ~Communicator() override;

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(link_ranks_.size()); }
  void post(std::shared_ptr<Request> request) override;
  // A request that failed for this group alone (a member aborted it or left
  // it, the ranks are out of step) aborts the communicator; one whose peer is
  // lost, or that timed out, aborts the shared transport (Transport::wait).
  void wait(Request& request, Deadline deadline, bool abort_on_error = true) override;
  bool wait_a_while(Request& request, Deadline until) override { return shared_->wait_a_while(request, until); }
  // From any thread; idempotent. Tells the members once.
  void abort(std::exception_ptr cause) override;
  void close(std::exception_ptr cause) override;
  std::exception_ptr aborted() const override;
  std::exception_ptr failure() const override;
  std::exception_ptr peer_failure(int peer) const override;
  std::string describe_peer(int peer) const override;
  bool same_host(int peer) const override;
  std::string host_of(int peer) const override;

  uint32_t id() const { return comm_; }

 private:
  const std::shared_ptr<Mesh> shared_;
  const uint32_t comm_;
  const std::vector<int> link_ranks_;  // group rank -> shared transport rank
  std::vector<int> group_rank_of_;     // shared transport rank -> group rank (-1: not a member)
  const int rank_;
  const std::string group_;
  // Ends the communicator (close or abort, whichever comes first): later
  // posts fail with `cause`. False when it had ended already.
  bool end(const std::exception_ptr& cause, bool by_abort);
  // Requests posted and not yet completed; close() reads it after raising
  // closed_, post() raises it before reading closed_ (both sequentially
  // consistent): one of the two always sees the other.
  std::atomic<int64_t> outstanding_{0};
  std::atomic<bool> ending_{false};  // claimed by the first close or abort
  std::atomic<bool> closed_{false};
  std::atomic<bool> aborted_{false};  // ended by abort(): aborted() answers close_cause_
  std::exception_ptr close_cause_;  // written before closed_ is raised
};

}  // namespace tdist
