// The survivors' one answer to "which ranks are gone" after a group failed
// (tdist::failed_ranks), so that each can call shrink_group with the same list.
//
// The store decides, not a vote among the survivors. ULFM's MPI_Comm_agree
// needs a fault-tolerant consensus because MPI has no reliable third party;
// a tdist job always has one, the store that every rank already trusts to
// start (the launcher's, under tdistrun). One compare_set on it fixes the
// answer once, for everyone, even when ranks decide at different moments or
// a rank dies while deciding. A rank is:
//   - alive when it says so: in the log before it closes any connection (the
//     mesh's before-abort hook), and again when it asks for the answer;
//   - dead on proof: its connection ended without a word before this rank
//     gave up (only its kernel closes a socket so; Mesh::peer_vanished), its
//     listener refuses a connection (its host answers for a process that is
//     gone; Mesh::peers_refusing), its process is gone from this host (its
//     shared-memory line), or the
//     launcher wrote `exited/<launch rank>` when it reaped it
//     (tdistrun --on-failure shrink);
//   - dead by silence: neither said it lives nor was proven dead within the
//     detection timeout of the rank that decides.
// The answer is every rank not alive when it is fixed. A rank that declares
// itself alive after that is out: it learns so from the answer. Being alive
// wins over proof, so a live rank is never declared dead by mistake unless it
// stays silent past the timeout. Each round (a first failure; after a shrink
// abandoned because another rank died, the next) has its own keys; a round's
// members are the survivors of the one before.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tdist/store.h"

namespace tdist {

class FailureAgreement {
 public:
  // `store`: keys shared by the mesh's ranks (this mesh's own namespace);
  // `launch_ranks[r]`: the rank the launcher knows mesh rank r as;
  // `death_records`: the launcher's store where it writes exited/<rank>
  // (null: none). `label` prefixes errors.
  FailureAgreement(std::shared_ptr<Store> store, int rank, int size, std::vector<int> launch_ranks,
                   std::shared_ptr<Store> death_records, std::string label);

  // This rank is alive: written to the current round's log, once. Bounded (a
  // store handle of its own with a short timeout); never throws.
  void say_alive() noexcept;

  // Proof that mesh rank `peer` is dead, asked while deciding: the mesh's and
  // the shared-memory segment's evidence (the launcher's record is read here).
  using Evidence = std::function<bool(int peer, bool first_round)>;
  // Of the mesh ranks given, those proven dead by asking the network (their
  // listener refuses): slower than Evidence, so asked now and then, for all
  // the undecided ranks at once.
  using Probe = std::function<std::vector<int>(const std::vector<int>& peers)>;

  // Blocks until the round's answer is fixed; returns the dead mesh ranks,
  // sorted (every earlier round's too). `silence`: how long to wait for ranks
  // that neither say they live nor are proven dead. DistBackendError when
  // this rank is among them, or the store fails.
  std::vector<int> decide(const Evidence& evidence, const Probe& probe, std::chrono::milliseconds silence);

  // Of `peers` (mesh ranks), those proven dead now by the evidence (as after
  // this rank gave up), the launcher's record or the probe; no waiting, no
  // store writes. For the group that replaces this one, while it forms.
  std::vector<int> proven_dead(const std::vector<int>& peers, const Evidence& evidence, const Probe& probe);

  // A shrink built on the current answer was abandoned (a rank died during
  // it): the next decide() runs a new round among that answer's survivors.
  void next_round();

  // Whether some rank began the current round (the peers are asking).
  bool under_way();

  // The answer of the current round when fixed, else empty.
  std::vector<int> known_dead() const;

 private:
  std::string key(const std::string& name) const;
  bool launcher_says_dead(int peer);

  std::shared_ptr<Store> store_;
  std::shared_ptr<Store> quick_;  // a clone with a short timeout, for say_alive
  const int rank_;
  const int size_;
  const std::vector<int> launch_ranks_;
  std::shared_ptr<Store> death_records_;
  const std::string label_;
  mutable std::mutex mu_;
  int round_ = 0;
  int said_alive_ = -1;  // the last round say_alive wrote to
  std::vector<int> dead_before_;  // the previous round's answer
  std::vector<int> answer_;       // this round's, once fixed
  bool answered_ = false;
};

}  // namespace tdist
