// The process's one transport context, shared by every group: the default
// group makes it, and every other group is a Communicator over it
// (transport/communicator.h), told apart by a communicator id. A mesh owns
// the connection to each peer (the control plane), matching
// (transport/matching.h), progress and blame; each peer's messages go over
// the data path both ends pick (transport/data_path_registry.h). Groups and
// backends hold a Mesh, never a concrete one: the mesh over TCP
// (transport/tcp/) is today's only control plane, made by connect_mesh.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tdist/store.h"
#include "transport/transport.h"
#include "util/deadline.h"

namespace tdist {

struct MeshOptions {
  std::string label;              // "rank 1 of group default_pg": prefixes errors
  std::vector<int> global_ranks;  // transport rank -> global rank, for messages
  Millis timeout{300'000};        // for the connection set-up
  // Given the tag of a receive waiting on a peer and the tag of a message that
  // peer sent instead, says how the ranks are out of step ("" if they are not).
  // The waiting receive then fails at once rather than at its deadline.
  std::function<std::string(uint64_t waiting_tag, uint64_t arrived_tag)> desync{};
  // What a message's tag belongs to ("all_reduce #2 (float32, SUM, step 1)"),
  // for errors about one message; unset: the tag's number is shown.
  std::function<std::string(uint64_t tag)> describe_tag{};
  // Of the given ranks, those proven dead (BackendOptions::members_gone):
  // asked while waiting for the ranks to publish their addresses, so that the
  // set-up fails at once naming a rank that died meanwhile. Unset: the timeout.
  std::function<std::vector<int>(const std::vector<int>& ranks)> members_gone{};
};

class Mesh : public Transport {
 public:
  // aborted() != nullptr, in one atomic load and no virtual call (checked
  // before every operation of every group that shares the mesh).
  bool stopped() const { return stop_.load(std::memory_order_acquire); }
  // A communicator of this mesh is closed: its posted receives fail with
  // `cause`, its buffered messages are freed, and its messages that arrive
  // later are dropped. The caller makes sure no request of it is under way.
  virtual void close_comm(uint32_t comm, std::exception_ptr cause) = 0;
  // Before close_comm, when this rank leaves the communicator: tells each of
  // `links` (its members, as the mesh's ranks) that has a connection, after
  // the communicator's messages to it, so that they fail at once saying it left.
  virtual void say_goodbye(uint32_t comm, const std::vector<int>& links) = 0;
  // A communicator of this mesh aborts while requests of it may be under way
  // (Communicator::abort, or its close with requests outstanding): closed as
  // by close_comm, and later requests fail with `cause`. A receive under way
  // is redirected (the rest of its payload is dropped) and a send under way
  // finishes from a copy of its remaining bytes, so no buffer of the
  // communicator is touched once this returns. Other communicators, the
  // connections and the peers' liveness (peer_vanished) are untouched.
  virtual void abort_comm(uint32_t comm, std::exception_ptr cause) = 0;
  // After abort_comm: tells each of `links` (the members, as the mesh's
  // ranks) that has a connection that this rank, `group_rank` in group
  // `group`, aborted the communicator because of `why` (wire::kCommAbortMagic):
  // they fail its requests at once, naming this rank.
  virtual void tell_comm_aborted(uint32_t comm, const std::vector<int>& links, int group_rank,
                                 const std::string& group, const std::string& why) = 0;

  // Whether `peer`'s connection ended without a word from it (no abort
  // notice, no goodbye) before this rank gave up on the mesh: only the
  // peer's kernel closes a socket that way, when its process ended. A rank
  // that gives up on purpose first runs the before-abort hook (below), so
  // the failure agreement (backends/failure_agreement.h) takes this as proof
  // of death only for ranks that did not say they live.
  virtual bool peer_vanished(int peer) const = 0;
  // Which of `peers` refuse a new connection to the address they listen on
  // (asked once, all at once, for at most `limit`): their process is gone
  // while their host still answers. A live rank keeps its mesh's listener
  // open for the mesh's whole life, even stopped or aborted, so a refusal
  // is proof of death; silence (a host gone, a cable pulled) is not, nor is
  // a connection another process now takes on a reused port.
  virtual std::vector<int> peers_refusing(const std::vector<int>& peers, Millis limit) const = 0;
  // Runs once, when this rank first gives up on the mesh (abort, not a
  // goodbye), before any of its connections closes: the failure agreement
  // registers this rank as alive there. It must be bounded and not throw.
  void set_before_abort(std::function<void()> hook) {
    std::lock_guard<std::mutex> lock(hook_mu_);
    before_abort_ = std::move(hook);
  }

 protected:
  std::atomic<bool> stop_{false};  // raised by the implementation's abort
  // The implementation's abort calls it once, first.
  void run_before_abort() {
    std::function<void()> hook;
    {
      std::lock_guard<std::mutex> lock(hook_mu_);
      hook = std::move(before_abort_);
      before_abort_ = nullptr;
    }
    if (hook) hook();
  }

 private:
  std::mutex hook_mu_;
  std::function<void()> before_abort_;
};

// Publishes this rank's address under the store and reads every other rank's;
// blocks until all ranks published (DistNetworkError naming the missing ranks
// on timeout). Connections open on first use.
std::shared_ptr<Mesh> connect_mesh(Store& store, int rank, int size, MeshOptions options);

}  // namespace tdist
