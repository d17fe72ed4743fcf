// Reading and writing the address records of tcp_record.h.
#include "transport/tcp/tcp_record.h"

#include <algorithm>
#include <sstream>

#include "tdist/errors.h"
#include "util/settings.h"

namespace tdist::tcp {

// How many connections this rank would like to each peer. A pair uses the
// smaller of its two ranks' numbers, so a rank started without the variable
// still connects (with one socket).
int sockets_per_peer() {
  static_assert(settings::info<"TDIST_SOCKETS_PER_PEER">().max == kMaxSocketsPerPeer,
                "the registry's range of TDIST_SOCKETS_PER_PEER is what the wire carries");
  return static_cast<int>(settings::get<"TDIST_SOCKETS_PER_PEER">());
}

std::string encode(const PeerRecord& info) {
  std::string out = info.host_id + "\n" + std::to_string(info.nonce) + "\n" + std::to_string(info.port) + "\n";
  for (size_t i = 0; i < info.addresses.size(); ++i) out += (i ? "," : "") + info.addresses[i];
  out += "\n" + std::to_string(info.sockets) + "\n";
  for (size_t i = 0; i < info.interfaces.size(); ++i) out += (i ? "," : "") + info.interfaces[i];
  out += "\n";
  for (size_t i = 0; i < info.endpoints.size(); ++i)
    out += (i ? ";" : "") + info.endpoints[i].address + "|" + std::to_string(info.endpoints[i].port);
  return out;
}

PeerRecord decode(const std::string& text, int rank) {
  std::stringstream ss(text);
  PeerRecord info;
  std::string nonce, port, addrs, sockets;
  if (!std::getline(ss, info.host_id) || !std::getline(ss, nonce) || !std::getline(ss, port) ||
      !std::getline(ss, addrs))
    throw DistNetworkError("malformed address record of rank " + std::to_string(rank) + " in the store");
  try {
    info.nonce = std::stoull(nonce);
    info.port = static_cast<uint16_t>(std::stoul(port));
    if (std::getline(ss, sockets)) info.sockets = std::clamp(std::stoi(sockets), 1, kMaxSocketsPerPeer);
  } catch (const std::exception&) {
    throw DistNetworkError("malformed address record of rank " + std::to_string(rank) + " in the store");
  }
  std::stringstream as(addrs);
  for (std::string a; std::getline(as, a, ',');) info.addresses.push_back(a);
  std::string names, endpoints;
  if (std::getline(ss, names)) {
    std::stringstream ns(names);
    for (std::string n; std::getline(ns, n, ',');) info.interfaces.push_back(n);
  }
  if (std::getline(ss, endpoints)) {
    std::stringstream es(endpoints);
    for (std::string e; std::getline(es, e, ';');) {
      const size_t bar = e.rfind('|');
      if (bar == std::string::npos)
        throw DistNetworkError("malformed address record of rank " + std::to_string(rank) + " in the store");
      unsigned long port = 0;
      try {
        port = std::stoul(e.substr(bar + 1));
      } catch (const std::exception&) {
      }
      if (port == 0 || port > 65535)
        throw DistNetworkError("malformed address record of rank " + std::to_string(rank) + " in the store");
      info.endpoints.push_back({e.substr(0, bar), static_cast<uint16_t>(port)});
    }
  }
  // With several interfaces, one listener on each; else none listed apart.
  const size_t want = info.interfaces.size() > 1 ? info.interfaces.size() : 0;
  if (info.endpoints.size() != want)
    throw DistNetworkError("malformed address record of rank " + std::to_string(rank) + " in the store");
  return info;
}

}  // namespace tdist::tcp
