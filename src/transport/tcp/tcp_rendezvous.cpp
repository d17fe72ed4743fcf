// Setting up the TCP mesh through the store: every rank publishes
// "<host id>\n<nonce>\n<port>\n<address,...>\n<sockets per peer>\n<interface,...>\n<address|port;...>"
// under "tcp/<rank>", dials every lower rank and accepts every higher one.
#include <algorithm>
#include <random>
#include <sstream>
#include <thread>

#include "tdist/errors.h"
#include "transport/tcp/tcp_addresses.h"
#include "transport/tcp/tcp_handshake.h"
#include "transport/tcp/tcp_peer.h"
#include "transport/tcp/tcp_transport.h"
#include "transport/wire.h"
#include "util/env.h"
#include "util/host_id.h"
#include "util/job_token.h"
#include "util/logging.h"

namespace tdist {

namespace {

using namespace tcp_addresses;

struct Endpoint {
  std::string address;
  uint16_t port = 0;
};

struct PeerInfo {
  std::string host_id;
  uint64_t nonce = 0;
  uint16_t port = 0;
  std::vector<std::string> addresses;
  int sockets = 1;  // TDIST_SOCKETS_PER_PEER of that rank
  std::vector<std::string> interfaces;  // TDIST_SOCKET_IFNAME's list of that rank
  std::vector<Endpoint> endpoints;      // with two or more interfaces: one listener on each
};

constexpr int kMaxSocketsPerPeer = 16;

// How many connections this rank would like to each peer. A pair uses the
// smaller of its two ranks' numbers, so a rank started without the variable
// still connects (with one socket).
int sockets_per_peer() {
  auto v = get_env("TDIST_SOCKETS_PER_PEER");
  if (!v) return 1;
  auto n = get_env_int("TDIST_SOCKETS_PER_PEER");
  if (!n || *n < 1 || *n > kMaxSocketsPerPeer)
    throw DistValueError("TDIST_SOCKETS_PER_PEER=" + *v + " is not a number of sockets from 1 to " +
                         std::to_string(kMaxSocketsPerPeer));
  return static_cast<int>(*n);
}

std::string encode(const PeerInfo& info) {
  std::string out = info.host_id + "\n" + std::to_string(info.nonce) + "\n" + std::to_string(info.port) + "\n";
  for (size_t i = 0; i < info.addresses.size(); ++i) out += (i ? "," : "") + info.addresses[i];
  out += "\n" + std::to_string(info.sockets) + "\n";
  for (size_t i = 0; i < info.interfaces.size(); ++i) out += (i ? "," : "") + info.interfaces[i];
  out += "\n";
  for (size_t i = 0; i < info.endpoints.size(); ++i)
    out += (i ? ";" : "") + info.endpoints[i].address + "|" + std::to_string(info.endpoints[i].port);
  return out;
}

PeerInfo decode(const std::string& text, int rank) {
  std::stringstream ss(text);
  PeerInfo info;
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

std::string interfaces_text(size_t n) { return std::to_string(n) + (n == 1 ? " interface" : " interfaces"); }

// Every rank must list as many interfaces: a pair's connections are spread
// over its interfaces in order, which both ends must count alike. Every rank
// finds the same mismatch and fails; rank 0, whose process usually serves the
// store, fails last, once the others have read the records (bounded by the
// deadline), so that they can name the lists rather than a lost store.
void check_interface_counts(const std::vector<PeerInfo>& infos, int rank, Store& store, Deadline deadline) {
  const PeerInfo& mine = infos[rank];
  for (size_t r = 0; r < infos.size(); ++r) {
    const size_t a = mine.interfaces.size(), b = infos[r].interfaces.size();
    if (a == b || std::max(a, b) <= 1) continue;
    const std::string key = "tcp/interfaces_mismatch_read";
    const int64_t read = store.add(key, 1);
    const int size = static_cast<int>(infos.size());
    if (rank == 0 && read < size) {
      // Bounded apart from the deadline too: a rank that died meanwhile never reads.
      const Deadline until = deadline.earlier(Deadline::after(Millis(60000)));
      while (store.add(key, 0) < size && !until.expired()) std::this_thread::sleep_for(Millis(20));
    }
    throw DistValueError("rank " + std::to_string(rank) + " lists TDIST_SOCKET_IFNAME=" +
                         listed_text(mine.interfaces) + " (" + interfaces_text(a) + ") but rank " +
                         std::to_string(r) + " lists " + listed_text(infos[r].interfaces) + " (" +
                         interfaces_text(b) + "): every rank must list as many, as connections are spread over "
                         "them in order");
  }
}

std::string missing_ranks_text(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return "[" + out + "]";
}

}  // namespace

std::unique_ptr<TcpTransport> TcpTransport::connect(Store& store, int rank, int size, TcpTransportOptions options) {
  std::unique_ptr<TcpTransport> t(new TcpTransport(rank, size, options));
  const std::string& label = t->options_.label;
  Deadline deadline = Deadline::after(options.timeout);
  if (size == 1) {
    t->start();
    return t;
  }

  // The job token, read once: every connection of this mesh is proven with it.
  const std::optional<std::string> token = auth::job_token();
  if (!token) auth::warn_open_once(label + "'s connections to other ranks");
  PeerInfo self;
  self.interfaces = listed_interfaces();
  if (self.interfaces.size() > static_cast<size_t>(kMaxSocketsPerPeer))
    throw DistValueError("TDIST_SOCKET_IFNAME=" + listed_text(self.interfaces) + " lists " +
                         std::to_string(self.interfaces.size()) + " interfaces; at most " +
                         std::to_string(kMaxSocketsPerPeer));
  std::vector<std::vector<std::string>> per_interface;
  std::vector<std::string> addresses = local_addresses(self.interfaces, per_interface);
  // One listener on each listed interface where there are several, else one.
  std::vector<Fd> listeners;
  if (per_interface.size() > 1) {
    for (const auto& found : per_interface) {
      listeners.push_back(listen_tcp(found.front(), 0));
      self.endpoints.push_back({found.front(), local_port(listeners.back().get())});
    }
  } else {
    listeners.push_back(listen_tcp(choose_bind_address(addresses), 0));
  }
  self.host_id = host_id();
  self.nonce = std::random_device{}() ^ (uint64_t(std::random_device{}()) << 32);
  self.port = local_port(listeners.front().get());
  self.addresses = addresses;
  self.sockets = sockets_per_peer();
  const size_t interfaces = self.endpoints.size();  // 0 or at least 2
  store.set("tcp/" + std::to_string(rank), encode(self));

  // Every rank's record (this waits for all ranks to arrive).
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) keys.push_back("tcp/" + std::to_string(r));
  try {
    store.wait(keys, deadline.remaining());
  } catch (const DistError&) {
    std::vector<int> missing;
    for (int r = 0; r < size; ++r)
      if (!store.check({keys[r]})) missing.push_back(r);
    throw DistNetworkError(label + ": ranks " + missing_ranks_text(missing) + " did not join within " +
                           format_ms(options.timeout));
  }
  std::vector<PeerInfo> infos(size);
  auto values = store.multi_get(keys);
  for (int r = 0; r < size; ++r) infos[r] = decode(values[r], r);
  check_interface_counts(infos, rank, store, deadline);
  // Connections per pair: with several interfaces, at least one on each.
  auto sockets_with = [&](int r) {
    return std::max(static_cast<int>(interfaces), std::min(self.sockets, infos[r].sockets));
  };
  // The interface of a pair's connection `lane`: pairs start at different
  // ones, so that the main connections too spread over them.
  auto interface_of = [&](int peer, int lane) { return static_cast<size_t>(rank + peer + lane) % interfaces; };

  // Dial the lower ranks.
  for (int peer = 0; peer < rank; ++peer) {
    const PeerInfo& info = infos[peer];
    const std::string who = t->describe_peer(peer);
    std::string reached;  // without listed interfaces: the address that answered, for every connection
    // Opens connection `lane` (connected, before its handshake). With
    // several interfaces it goes from this rank's interface j to the peer's
    // listener on its interface j.
    auto open = [&](int lane) {
      const std::string which = lane == 0 ? "" : " (socket " + std::to_string(lane + 1) + ")";
      if (interfaces == 0) return connect_tcp(reached, info.port, deadline, label + " dialling " + who + which);
      const size_t j = interface_of(peer, lane);
      return connect_tcp(info.endpoints[j].address, info.endpoints[j].port, deadline,
                         label + " dialling " + who + which + " over " + self.interfaces[j], per_interface[j].front());
    };
    Fd fd;
    if (interfaces > 0) {
      fd = open(0);
    } else {
      std::vector<std::string> candidates = info.addresses;
      // A peer of this host that listens on loopback too is dialled there first.
      if (info.host_id == self.host_id && has_loopback(info.addresses) && candidates.front() != "127.0.0.1")
        candidates.insert(candidates.begin(), "127.0.0.1");
      std::string last_error;
      for (size_t i = 0; i < candidates.size() && !fd.valid(); ++i) {
        bool last = i + 1 == candidates.size();
        Deadline step = last ? deadline : deadline.earlier(Deadline::after(Millis(3000)));
        try {
          fd = connect_tcp(candidates[i], info.port, step, label + " dialling " + who);
          reached = candidates[i];
        } catch (const DistNetworkError& e) {
          last_error = e.what();
        }
      }
      if (!fd.valid()) throw DistNetworkError(last_error);
    }
    tcp_handshake::dial(fd.get(), {rank, peer, size, 0}, info.nonce, token, deadline, who);
    auto p = std::make_unique<Peer>();
    p->rank = peer;
    p->address = peer_address(fd.get());
    p->host_id = info.host_id;
    for (int lane = 1; lane < sockets_with(peer); ++lane) {
      Fd extra = open(lane);
      tcp_handshake::dial(extra.get(), {rank, peer, size, static_cast<uint32_t>(lane)}, info.nonce, token, deadline,
                          who + " (socket " + std::to_string(lane + 1) + ")");
      p->lanes.push_back(std::make_unique<Lane>());
      p->lanes.back()->fd = std::move(extra);
    }
    p->fd = std::move(fd);
    t->peers_[peer] = std::move(p);
  }

  // Accept the higher ranks, each with all its sockets. A connection that does
  // not say a valid hello is dropped without disturbing the others.
  auto connected = [&](int r) {
    const Peer* p = t->peers_[r].get();
    if (!p || !p->fd.valid()) return false;
    for (auto& lane : p->lanes)
      if (!lane) return false;
    return true;
  };
  int expected = 0;
  for (int r = rank + 1; r < size; ++r) expected += sockets_with(r);
  // Handshakes are read concurrently: a silent or hostile connection costs
  // the job nothing but a log line.
  std::vector<int> listen_fds;
  for (const Fd& l : listeners) listen_fds.push_back(l.get());
  tcp_handshake::Acceptor acceptor(listen_fds, rank, size, self.nonce, token, label);
  auto wanted = [&](int from, uint32_t lane) {
    if (lane >= static_cast<uint32_t>(sockets_with(from))) return false;
    const Peer* p = t->peers_[from].get();
    if (!p) return true;
    return lane == 0 ? !p->fd.valid() : p->lanes[lane - 1] == nullptr;
  };
  while (expected > 0) {
    auto accepted = acceptor.next(deadline, wanted);
    if (!accepted) {
      std::vector<int> missing;
      for (int r = rank + 1; r < size; ++r)
        if (!connected(r)) missing.push_back(r);
      throw DistNetworkError(label + ": ranks " + missing_ranks_text(missing) + " did not connect within " +
                             format_ms(options.timeout));
    }
    const int from = accepted->rank;
    Peer* p = t->peers_[from].get();
    if (!p) {
      auto created = std::make_unique<Peer>();
      created->rank = from;
      created->host_id = infos[from].host_id;
      created->lanes.resize(sockets_with(from) - 1);
      p = created.get();
      t->peers_[from] = std::move(created);
    }
    if (accepted->lane == 0) {
      p->address = accepted->address;
      p->fd = std::move(accepted->fd);
    } else {
      p->lanes[accepted->lane - 1] = std::make_unique<Lane>();
      p->lanes[accepted->lane - 1]->fd = std::move(accepted->fd);
    }
    --expected;
  }
  t->attach_data_paths(deadline);
  // Every peer read this rank's record before it connected (higher ranks) or
  // accepted (lower ranks): it can go, so that the store does not grow with
  // every group made (FileStore cannot delete, as torch's cannot: it keeps it).
  try {
    store.delete_key("tcp/" + std::to_string(rank));
  } catch (const DistError&) {
  }
  t->start();
  return t;
}

}  // namespace tdist
