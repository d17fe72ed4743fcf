// What a rank publishes in the store so that its peers can dial it, when
// they first need to: "<host id>\n<nonce>\n<port>\n<address,...>\n<sockets
// per peer>\n<interface,...>\n<address|port;...>" under "tcp/<rank>".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tdist::tcp {

// The most connections one pair of ranks may have (TDIST_SOCKETS_PER_PEER,
// or the number of listed interfaces).
inline constexpr int kMaxSocketsPerPeer = 16;

struct Endpoint {
  std::string address;
  uint16_t port = 0;
};

struct PeerRecord {
  std::string host_id;
  uint64_t nonce = 0;  // fresh per transport: a dialler proves it read the current record
  uint16_t port = 0;
  std::vector<std::string> addresses;
  int sockets = 1;                      // TDIST_SOCKETS_PER_PEER of that rank
  std::vector<std::string> interfaces;  // TDIST_SOCKET_IFNAME's list of that rank
  std::vector<Endpoint> endpoints;      // with two or more interfaces: one listener on each
};

std::string encode(const PeerRecord& record);
// DistNetworkError naming `rank` when the text is not a well-formed record
// (anyone who can write the store could forge one).
PeerRecord decode(const std::string& text, int rank);

// How many connections this rank would like to each peer (TDIST_SOCKETS_PER_PEER).
int sockets_per_peer();

}  // namespace tdist::tcp
