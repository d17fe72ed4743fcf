// Setting up the TCP mesh through the store: every rank publishes
// "<host id>\n<nonce>\n<port>\n<address,address,...>\n<sockets per peer>"
// under "tcp/<rank>", dials every lower rank and accepts every higher one.
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <algorithm>
#include <random>
#include <sstream>

#include "tdist/errors.h"
#include "transport/tcp/tcp_handshake.h"
#include "transport/tcp/tcp_peer.h"
#include "transport/tcp/tcp_transport.h"
#include "transport/wire.h"
#include "util/bind_address.h"
#include "util/env.h"
#include "util/host_id.h"
#include "util/job_token.h"
#include "util/logging.h"

namespace tdist {

namespace {

struct PeerInfo {
  std::string host_id;
  uint64_t nonce = 0;
  uint16_t port = 0;
  std::vector<std::string> addresses;
  int sockets = 1;  // TDIST_SOCKETS_PER_PEER of that rank
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

// Addresses other hosts may reach us at: those of TDIST_SOCKET_IFNAME (a
// comma-separated list of interfaces) or else of every interface that is up,
// loopback last.
std::vector<std::string> local_addresses() {
  auto wanted = get_env("TDIST_SOCKET_IFNAME");
  std::vector<std::string> names;
  if (wanted) {
    std::stringstream ss(*wanted);
    for (std::string n; std::getline(ss, n, ',');)
      if (!n.empty()) names.push_back(n);
  }
  std::vector<std::string> out, loopback;
  ifaddrs* head = nullptr;
  if (getifaddrs(&head) != 0) return {"127.0.0.1"};
  for (ifaddrs* a = head; a != nullptr; a = a->ifa_next) {
    if (!a->ifa_addr || !(a->ifa_flags & IFF_UP)) continue;
    int fam = a->ifa_addr->sa_family;
    if (fam != AF_INET && fam != AF_INET6) continue;
    if (!names.empty() && std::find(names.begin(), names.end(), a->ifa_name) == names.end()) continue;
    char buf[INET6_ADDRSTRLEN] = {0};
    if (fam == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, buf, sizeof(buf));
    } else {
      auto* in6 = reinterpret_cast<sockaddr_in6*>(a->ifa_addr);
      if (IN6_IS_ADDR_LINKLOCAL(&in6->sin6_addr)) continue;  // needs a scope id; skip
      inet_ntop(AF_INET6, &in6->sin6_addr, buf, sizeof(buf));
    }
    ((a->ifa_flags & IFF_LOOPBACK) ? loopback : out).push_back(buf);
  }
  freeifaddrs(head);
  if (!names.empty() && out.empty() && loopback.empty())
    throw DistNetworkError("TDIST_SOCKET_IFNAME=" + *wanted + " names no interface that is up with an address");
  out.insert(out.end(), loopback.begin(), loopback.end());
  if (out.empty()) out.push_back("127.0.0.1");
  return out;
}

// Where the mesh listener binds, and what this rank publishes: the interfaces
// of TDIST_SOCKET_IFNAME; loopback for a job whose MASTER_ADDR is loopback
// (every rank is on this host); else the address of the route to MASTER_ADDR;
// every interface with TDIST_BIND_ALL=1 or when none of these is known (a
// group made over a user's store).
std::string choose_bind_address(std::vector<std::string>& addresses) {
  if (env_flag("TDIST_BIND_ALL", false)) return "";
  if (get_env("TDIST_SOCKET_IFNAME")) return addresses.front();
  auto master = get_env("MASTER_ADDR");
  if (!master || master->empty()) return "";
  if (is_loopback_host(*master)) {
    addresses = {"127.0.0.1"};
    return addresses.front();
  }
  std::string towards = local_address_towards(*master);
  if (towards.empty() || is_loopback_host(towards)) return "";
  addresses = {towards};
  return towards;
}

bool has_loopback(const std::vector<std::string>& addresses) {
  return std::any_of(addresses.begin(), addresses.end(), [](const std::string& a) { return is_loopback_host(a); });
}

std::string encode(const PeerInfo& info) {
  std::string out = info.host_id + "\n" + std::to_string(info.nonce) + "\n" + std::to_string(info.port) + "\n";
  for (size_t i = 0; i < info.addresses.size(); ++i) out += (i ? "," : "") + info.addresses[i];
  return out + "\n" + std::to_string(info.sockets);
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
  return info;
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
  std::vector<std::string> addresses = local_addresses();
  Fd listener = listen_tcp(choose_bind_address(addresses), 0);
  PeerInfo self;
  self.host_id = host_id();
  self.nonce = std::random_device{}() ^ (uint64_t(std::random_device{}()) << 32);
  self.port = local_port(listener.get());
  self.addresses = addresses;
  self.sockets = sockets_per_peer();
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

  // Dial the lower ranks.
  for (int peer = 0; peer < rank; ++peer) {
    const PeerInfo& info = infos[peer];
    std::vector<std::string> candidates = info.addresses;
    // A peer of this host that listens on loopback too is dialled there first.
    if (info.host_id == self.host_id && has_loopback(info.addresses) && candidates.front() != "127.0.0.1")
      candidates.insert(candidates.begin(), "127.0.0.1");
    Fd fd;
    std::string last_error, reached;  // the address that answered: the extra sockets go there too
    for (size_t i = 0; i < candidates.size() && !fd.valid(); ++i) {
      bool last = i + 1 == candidates.size();
      Deadline step = last ? deadline : deadline.earlier(Deadline::after(Millis(3000)));
      try {
        fd = connect_tcp(candidates[i], info.port, step, label + " dialling " + t->describe_peer(peer));
        reached = candidates[i];
      } catch (const DistNetworkError& e) {
        last_error = e.what();
      }
    }
    if (!fd.valid()) throw DistNetworkError(last_error);
    const std::string who = t->describe_peer(peer);
    tcp_handshake::dial(fd.get(), {rank, peer, size, 0}, info.nonce, token, deadline, who);
    auto p = std::make_unique<Peer>();
    p->rank = peer;
    p->address = peer_address(fd.get());
    p->host_id = info.host_id;
    for (int lane = 1; lane < std::min(self.sockets, info.sockets); ++lane) {
      const std::string which = " (socket " + std::to_string(lane + 1) + ")";
      Fd extra = connect_tcp(reached, info.port, deadline, label + " dialling " + who + which);
      tcp_handshake::dial(extra.get(), {rank, peer, size, static_cast<uint32_t>(lane)}, info.nonce, token, deadline,
                          who + which);
      p->lanes.push_back(std::make_unique<Lane>());
      p->lanes.back()->fd = std::move(extra);
    }
    p->fd = std::move(fd);
    t->peers_[peer] = std::move(p);
  }

  // Accept the higher ranks, each with all its sockets. A connection that does
  // not say a valid hello is dropped without disturbing the others.
  auto sockets_with = [&](int r) { return std::min(self.sockets, infos[r].sockets); };
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
  tcp_handshake::Acceptor acceptor(listener.get(), rank, size, self.nonce, token, label);
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
