// The handshake that opens every connection of the TCP mesh. The acceptor
// speaks first with a fresh nonce; the dialler proves it knows the job token
// (HMAC over both nonces and who it claims to be); the acceptor proves it back.
// The token never crosses the wire and nothing published in the store lets a
// reader impersonate a rank. Without a job token only the nonce the acceptor
// published in the store is checked (torch's open mode).
//
// The acceptor reads all pending handshakes at once, each with its own short
// deadline, so a silent or hostile connection neither delays nor fails the
// job: it is dropped with a log line naming its address. Connections open on
// first use (any rank may dial any other); when two ranks dial each other at
// once, the acceptor's verdict keeps the lower rank's connection.
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

// What the acceptor answered a valid Hello.
enum class Verdict {
  Accept,            // this connection is the pair's
  Superseded,        // the acceptor dials this rank too, and its connection (the lower rank's) is kept
  AlreadyConnected,  // the pair has its connection (or this lane) already
};

// The dialler's side, on a connected socket: reads the challenge, sends its
// Hello, reads the Welcome and checks the acceptor's proof. Returns Accept or
// Superseded; DistNetworkError naming `peer` (rank and address) on any
// failure, a refusal, or AlreadyConnected.
Verdict dial(int fd, const Identity& id, uint64_t store_nonce, const std::optional<std::string>& token,
          Deadline deadline, const std::string& peer);

struct Accepted {
  Fd fd;  // blocking, as accept returns it; invalid if the Welcome could not be sent (the verdict is void)
  int rank = 0;
  uint32_t lane = 0;
  std::string address;
};

class Acceptor {
 public:
  // How long one connection may take to say its Hello, and how many may be
  // in handshake at once (beyond it, new ones wait in the listen backlog).
  static constexpr Millis kHandshakeTime{5000};
  static constexpr size_t kMaxPending = 64;
  // While that many are in handshake, one silent for this long gives its place to a new one.
  static constexpr Millis kPatience{1000};

  // `listen_fds` (one per interface the rank listens on) are made
  // non-blocking. `label` prefixes log lines. `wake_fd` (if not -1) ends
  // next() once it is readable.
  Acceptor(std::vector<int> listen_fds, int rank, int size, uint64_t store_nonce, std::optional<std::string> token,
           std::string label, int wake_fd = -1);
  ~Acceptor();

  // The verdict on a proven Hello from (rank, lane).
  using Judge = std::function<Verdict(int rank, uint32_t lane)>;
  // The next connection that completes a valid handshake and that `judge`
  // accepts, or nullopt at the deadline or once the wake fd is readable.
  std::optional<Accepted> next(Deadline deadline, const Judge& judge);

 private:
  struct Pending;
  void accept_all(int listen_fd);
  // Reads what arrived; true when the Hello is complete. Drops the connection
  // (false, `gone`) on EOF or error.
  bool read_hello(Pending& p, bool* gone);
  std::optional<Accepted> finish(Pending& p, const Judge& judge);
  void drop(size_t index, const std::string& why);

  std::vector<int> listen_fds_;
  int rank_, size_;
  uint64_t store_nonce_;
  std::optional<std::string> token_;
  std::string label_;
  int wake_fd_;
  std::vector<Pending> pending_;
};

}  // namespace tdist::tcp_handshake
