// The data paths a mesh can reach a peer by, by name (the entries of
// TDIST_TRANSPORTS other than "tcp", which is the control socket itself).
// A path registers a factory once per process, before the first group is
// made; the mesh asks the factories, when a pair first connects, whether
// they reach the peer and, for the one both ends pick, to set the path up
// over the pair's control socket. The built-in shared-memory rings register
// here too (transport/shm/shm_path.cpp); a test registers its own
// (tests/transport/mailbox_path.h).
//
// Every rank of a job must register the same paths (run the same program):
// both ends of a pair ask `reaches` and must get the same answer.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "transport/data_path.h"
#include "util/deadline.h"

namespace tdist {

// A pair's control socket while the pair sets up its path: connected,
// authenticated and still blocking; the mesh does not read it yet.
class SetupChannel {
 public:
  SetupChannel(int fd, int rank, int peer, bool same_host, std::string peer_name, std::string label)
      : fd_(fd), rank_(rank), peer_(peer), same_host_(same_host), peer_name_(std::move(peer_name)),
        label_(std::move(label)) {}

  int rank() const { return rank_; }  // this rank, in the mesh
  int peer() const { return peer_; }
  bool same_host() const { return same_host_; }
  const std::string& peer_name() const { return peer_name_; }  // "rank 3 at 10.0.0.2:4567"
  const std::string& label() const { return label_; }          // "rank 1 of group default_pg"
  // Whole transfers; DistNetworkError naming the peer on a closed socket or the deadline.
  void send(const void* data, size_t n, Deadline deadline) const;
  void recv(void* data, size_t n, Deadline deadline) const;
  int fd() const { return fd_; }  // for a set-up that drives the socket itself

 private:
  int fd_;
  int rank_;
  int peer_;
  bool same_host_;
  std::string peer_name_;
  std::string label_;
};

struct DataPathFactory {
  // What the path is, for errors: "shared memory".
  std::string description;
  // Whether the path could reach this peer (same answer at both ends: decide
  // from what both know, as whether they share a host).
  std::function<bool(const SetupChannel&)> reaches;
  // Sets the path up with the peer: both ends call it once both picked this
  // path. Returns the path at both ends or null at both (the pair then falls
  // back to the socket, or fails when TDIST_TRANSPORTS does not list tcp).
  std::function<std::unique_ptr<DataPath>(SetupChannel&, PathHost&, Deadline)> connect;
  // Unset, or why the path is off in this process ("" while it is usable):
  // TDIST_TRANSPORTS then skips it.
  std::function<std::string()> off_reason{};
};

// Adds a path under `name` (lower case, no comma). DistValueError for "tcp",
// a name registered already or a factory without reaches/connect.
void register_data_path(const std::string& name, DataPathFactory factory);
// The factory of `name`, or null.
const DataPathFactory* find_data_path(const std::string& name);
// Every name TDIST_TRANSPORTS accepts, in registration order, "tcp" last.
std::vector<std::string> known_data_paths();

}  // namespace tdist
