// The agents' rendezvous: how the tdistrun of every node agrees, round after
// round, on who is in the job, each node's rank, and when to restart.
//
// One agent hosts a TCPStore at the rendezvous endpoint (--rdzv-endpoint, or
// --master-addr:--master-port); every agent, the host's too, is its client.
// The same store serves the workers (TORCHELASTIC_USE_AGENT_STORE), each round
// under its own key prefix. A round closes when every node has joined
// (static: --node-rank given) or, with the c10d rendezvous, when MAX nodes
// joined or MIN did and --rdzv-conf last_call_timeout passed; node ranks are
// then the order in which the nodes joined. A node that arrives after a round
// closed waits for the next one, and the running nodes start that next round
// (when the job has room). A worker's failure starts the next round
// everywhere, counted against --max-restarts (--on-failure restart); with
// --on-failure shrink it starts none: the agent writes exited/<rank> under the
// round's workers' prefix, and the other workers run on.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "options.h"

namespace tdist {
class Store;
}

namespace tdistrun {

// The rendezvous failed (a timeout, a duplicate node rank, the store lost):
// the job cannot go on. The message names the round and what was missing.
class RendezvousError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A termination signal arrived while this node waited in the rendezvous.
class RendezvousInterrupted : public RendezvousError {
 public:
  explicit RendezvousInterrupted(int sig) : RendezvousError("interrupted by a signal"), signal(sig) {}
  int signal;
};

// This node's place in one round.
struct Placement {
  int round = 0;
  int node_rank = 0;
  int nnodes = 1;
  long long rank_offset = 0;  // the global rank of local rank 0
  long long world_size = 1;
  int restart_count = 0;      // failures before this round (TORCHELASTIC_RESTART_COUNT)
  std::string store_prefix;   // the workers' keys in the agent's store (TDIST_AGENT_STORE_PREFIX)
};

class AgentRendezvous {
 public:
  // Hosts the store when this node should (single node; node rank 0 of a
  // static job; the endpoint's host for c10d), else connects to it within
  // --rdzv-conf join_timeout. Throws RendezvousError.
  explicit AgentRendezvous(const Options& opt);
  ~AgentRendezvous();

  bool hosts_store() const { return hosts_; }
  const std::string& host() const { return host_; }
  int port() const { return port_; }

  // Asked while waiting: a termination signal's number, or 0.
  void set_interrupt_check(std::function<int()> check) { interrupted_ = std::move(check); }

  enum class Joined { kInRound, kJobFinished };
  // Joins the next round and waits for it to close with this node in it.
  Joined join(int local_nproc, Placement* placement);

  // What the other nodes ask of this one while its workers run.
  struct Poll {
    bool stop = false;          // stop the workers: the round is over
    bool job_failed = false;    // ... and the restarts are spent: the job fails
    std::string reason;         // who asked and why
  };
  Poll poll();

  // A worker of this node failed: every node restarts (or the job fails when
  // this was the last allowed restart). Counts one failure per round.
  void report_failure(const std::string& reason);
  // A worker of this node failed and the others run on (--on-failure shrink):
  // the key exited/<rank> of the workers' store (PrefixStore(store_prefix), as
  // env:// gives it to them) says so to every worker, in one line. Throws
  // RendezvousError.
  void report_exit(long long rank, const std::string& what);
  // Every worker of this node exited 0.
  void report_done();
  // Before exiting: the host keeps serving until the others have left (or
  // stopped sending heartbeats, or --rdzv-conf close_timeout passed).
  void leave();

 private:
  std::string key(const std::string& name) const;
  std::string round_key(int round, const std::string& name) const;
  std::string workers_prefix(int round) const;  // Placement::store_prefix
  int join_static(int* round);
  int join_dynamic(int* round);
  void heartbeat();
  void pause();  // between two looks at the store; throws RendezvousInterrupted

  Options opt_;
  std::shared_ptr<tdist::Store> store_;
  bool hosts_ = false;
  std::string host_;
  int port_ = 0;
  int round_ = -1;  // the round this node is in (-1: none yet)
  int nnodes_ = 0;  // its size
  int node_rank_ = 0;
  std::chrono::steady_clock::time_point last_beat_{};
  std::function<int()> interrupted_;
};

}  // namespace tdistrun
