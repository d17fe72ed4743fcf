// Setting up the TCP transport through the store: every rank publishes its
// address record (tcp_record.h) under "tcp/<rank>" and reads every other
// rank's in one wait and one multi_get. No connection opens here: a pair
// connects when it first exchanges a message (tcp_connect.cpp), so a rank
// holds sockets only to the peers its algorithms use.
#include <algorithm>
#include <random>
#include <thread>

#include "tdist/errors.h"
#include "transport/tcp/tcp_addresses.h"
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

std::string interfaces_text(size_t n) { return std::to_string(n) + (n == 1 ? " interface" : " interfaces"); }

// Every rank must list as many interfaces: a pair's connections are spread
// over its interfaces in order, which both ends must count alike. Every rank
// finds the same mismatch and fails; rank 0, whose process usually serves the
// store, fails last, once the others have read the records (bounded by the
// deadline), so that they can name the lists rather than a lost store.
void check_interface_counts(const std::vector<tcp::PeerRecord>& infos, int rank, Store& store, Deadline deadline) {
  const tcp::PeerRecord& mine = infos[rank];
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

  auto directory = std::make_unique<Directory>();
  // The job token, read once: every connection of this transport is proven with it.
  directory->token = auth::job_token();
  if (!directory->token) {
    // The job's rank 0 speaks for the job (said once per job, not once per group's rank 0).
    const int global = rank < static_cast<int>(options.global_ranks.size()) ? options.global_ranks[rank] : rank;
    auth::warn_open_once(label + "'s connections to other ranks", /*speaks_for_job=*/global == 0);
  }
  tcp::PeerRecord self;
  self.interfaces = listed_interfaces();
  if (self.interfaces.size() > static_cast<size_t>(tcp::kMaxSocketsPerPeer))
    throw DistValueError("TDIST_SOCKET_IFNAME=" + listed_text(self.interfaces) + " lists " +
                         std::to_string(self.interfaces.size()) + " interfaces; at most " +
                         std::to_string(tcp::kMaxSocketsPerPeer));
  std::vector<std::string> addresses = local_addresses(self.interfaces, directory->per_interface);
  // One listener on each listed interface where there are several, else one.
  if (directory->per_interface.size() > 1) {
    for (const auto& found : directory->per_interface) {
      directory->listeners.push_back(listen_tcp(found.front(), 0));
      self.endpoints.push_back({found.front(), local_port(directory->listeners.back().get())});
    }
  } else {
    directory->listeners.push_back(listen_tcp(choose_bind_address(addresses), 0));
  }
  self.host_id = host_id();
  self.nonce = std::random_device{}() ^ (uint64_t(std::random_device{}()) << 32);
  self.port = local_port(directory->listeners.front().get());
  self.addresses = addresses;
  self.sockets = tcp::sockets_per_peer();
  store.set("tcp/" + std::to_string(rank), tcp::encode(self));

  // Every rank's record (this waits for all ranks to arrive).
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) keys.push_back("tcp/" + std::to_string(r));
  auto missing_ranks = [&] {
    std::vector<int> missing;
    for (int r = 0; r < size; ++r)
      if (!store.check({keys[r]})) missing.push_back(r);
    return missing;
  };
  // With members_gone, in short waits that ask it between them.
  const Millis slice = options.members_gone ? Millis(100) : deadline.remaining();
  while (true) {
    try {
      store.wait(keys, std::min(slice, deadline.remaining()));
      break;
    } catch (const DistError&) {
      if (deadline.expired() || !options.members_gone)
        throw DistNetworkError(label + ": ranks " + missing_ranks_text(missing_ranks()) + " did not join within " +
                               format_ms(options.timeout));
    }
    const std::vector<int> gone = options.members_gone(missing_ranks());
    if (!gone.empty())
      throw DistNetworkError(label + ": ranks " + missing_ranks_text(gone) +
                             " died before they joined (their processes are gone)");
  }
  auto values = store.multi_get(keys);
  directory->records.resize(size);
  for (int r = 0; r < size; ++r) directory->records[r] = tcp::decode(values[r], r);
  check_interface_counts(directory->records, rank, store, deadline);
  // Once every rank has read the records they can go, so that the store does
  // not grow with every group made (FileStore cannot delete, as torch's
  // cannot: it keeps them).
  try {
    if (store.add("tcp/read", 1) == size) {
      for (const std::string& key : keys) store.delete_key(key);
      store.delete_key("tcp/read");
    }
  } catch (const DistError&) {
  }
  for (int r = 0; r < size; ++r) {
    if (r == rank) continue;
    auto p = std::make_unique<Peer>();
    p->rank = r;
    const tcp::PeerRecord& record = directory->records[r];
    p->host_id = record.host_id;
    p->advertised = record.endpoints.empty()
                        ? endpoint(record.addresses.empty() ? std::string("?") : record.addresses.front(), record.port)
                        : endpoint(record.endpoints.front().address, record.endpoints.front().port);
    t->peers_[r] = std::move(p);
  }
  t->directory_ = std::move(directory);
  t->start();
  return t;
}

// The mesh over TCP is the only control plane today (transport/mesh.h).
std::shared_ptr<Mesh> connect_mesh(Store& store, int rank, int size, MeshOptions options) {
  return TcpTransport::connect(store, rank, size, std::move(options));
}

}  // namespace tdist
