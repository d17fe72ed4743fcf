// A group's view of the process's shared transport. Every group of a process
// (new_group, new_subgroups, each DeviceMesh dimension) talks over the
// connections, shared-memory rings and progress thread that the default
// group made; a group adds only a communicator id, carried in every message
// header, so that its messages match only its own receives and its tags never
// meet another group's. Ranks are the group's, translated both ways.
//
// Closing a group (destroy_process_group) closes its communicator alone. A
// failure (a timeout, a lost peer, a message out of step) aborts the shared
// transport: every group of the process then fails with that cause, as MPI's
// default error handler and NCCL's asynchronous error handling end the job.
// A communicator cannot fail alone because a failed collective may leave
// receives under way into buffers its unwinding frees (see Transport::wait).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "transport/mesh.h"
#include "transport/transport.h"

namespace tdist {

class Communicator final : public Transport {
 public:
  // link_ranks[i]: the shared transport's rank of group rank i; `rank` is
  // this process's group rank.
  Communicator(std::shared_ptr<Mesh> shared, uint32_t comm, std::vector<int> link_ranks, int rank);
  ~Communicator() override;

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(link_ranks_.size()); }
  void post(std::shared_ptr<Request> request) override;
  void wait(Request& request, Deadline deadline, bool abort_on_error = true) override;
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
  // Requests posted and not yet completed; close() reads it after raising
  // closed_, post() raises it before reading closed_ (both sequentially
  // consistent): one of the two always sees the other.
  std::atomic<int64_t> outstanding_{0};
  std::atomic<bool> closed_{false};
  std::exception_ptr close_cause_;  // written before closed_ is raised
};

}  // namespace tdist
