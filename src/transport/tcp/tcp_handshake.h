// The handshake that opens every connection of the TCP mesh. The acceptor
// speaks first with a fresh nonce; the dialler proves it knows the job token
// (HMAC over both nonces and who it claims to be); the acceptor proves it back.
// The token never crosses the wire and nothing published in the store lets a
// reader impersonate a rank. Without a job token only the nonce the acceptor
// published in the store is checked (torch's open mode).
//
// The acceptor reads all pending handshakes at once, each with its own short
// deadline, so a silent or hostile connection neither delays nor fails the
// job: it is dropped with a log line naming its address.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "transport/wire.h"
#include "util/deadline.h"
#include "util/socket.h"

namespace tdist::tcp_handshake {

// What both ends of one connection must agree on.
struct Identity {
  int dialler = 0;
  int acceptor = 0;
  int size = 0;
  uint32_t lane = 0;
};

// The dialler's side, on a connected socket: reads the challenge, sends its
// Hello, reads the Welcome and checks the acceptor's proof. DistNetworkError
// naming `peer` (rank and address) on any failure.
void dial(int fd, const Identity& id, uint64_t store_nonce, const std::optional<std::string>& token,
          Deadline deadline, const std::string& peer);

struct Accepted {
  Fd fd;  // blocking, as accept returns it
  int rank = 0;
  uint32_t lane = 0;
  std::string address;
};

class Acceptor {
 public:
  // How long one connection may take to say its Hello, and how many may be
  // in handshake at once (beyond it the oldest is dropped).
  static constexpr Millis kHandshakeTime{5000};
  static constexpr size_t kMaxPending = 64;

  // `listen_fds` (one per interface the rank listens on) are made
  // non-blocking. `label` prefixes log lines.
  Acceptor(std::vector<int> listen_fds, int rank, int size, uint64_t store_nonce, std::optional<std::string> token,
           std::string label);
  ~Acceptor();

  // The next connection that completes a valid handshake for a (rank, lane)
  // that `wanted` still expects, or nullopt at the deadline.
  std::optional<Accepted> next(Deadline deadline, const std::function<bool(int rank, uint32_t lane)>& wanted);

 private:
  struct Pending;
  void accept_all(int listen_fd);
  // Reads what arrived; true when the Hello is complete. Drops the connection
  // (false, `gone`) on EOF or error.
  bool read_hello(Pending& p, bool* gone);
  std::optional<Accepted> finish(Pending& p, const std::function<bool(int, uint32_t)>& wanted);
  void drop(size_t index, const std::string& why);

  std::vector<int> listen_fds_;
  int rank_, size_;
  uint64_t store_nonce_;
  std::optional<std::string> token_;
  std::string label_;
  std::vector<Pending> pending_;
};

}  // namespace tdist::tcp_handshake
