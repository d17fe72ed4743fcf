// Choosing a peer's data path from TDIST_TRANSPORTS, over the pair's freshly
// connected (still blocking) socket, before the transport reads it. The
// paths are the registered ones (transport/data_path_registry.h); none is
// named here.
#include <algorithm>
#include <sstream>
#include <string>

#include "tdist/errors.h"
#include "transport/data_path_registry.h"
#include "transport/tcp/tcp_peer.h"
#include "transport/tcp/tcp_transport.h"
#include "transport/wire.h"
#include "util/settings.h"
#include "util/host_id.h"

namespace tdist {

namespace {
std::vector<std::string> split_names(const std::string& list) {
  std::vector<std::string> names;
  std::stringstream ss(list);
  for (std::string name; std::getline(ss, name, ',');)
    if (!name.empty()) names.push_back(name);
  return names;
}

// Sends this end's wishes and returns the peer's.
std::string exchange_wishes(const SetupChannel& channel, const std::string& mine, Deadline deadline) {
  const wire::PathPick out{wire::kPathPickMagic, static_cast<uint32_t>(mine.size())};
  channel.send(&out, sizeof(out), deadline);
  if (!mine.empty()) channel.send(mine.data(), mine.size(), deadline);
  wire::PathPick in{};
  channel.recv(&in, sizeof(in), deadline);
  if (in.magic != wire::kPathPickMagic || in.list_size > wire::kMaxPathPickList)
    throw DistNetworkError(channel.label() + ": protocol error from " + channel.peer_name() +
                           ": bad choice of data path (magic " + std::to_string(in.magic) + ", " +
                           std::to_string(in.list_size) + " bytes)");
  std::string theirs(in.list_size, '\0');
  if (!theirs.empty()) channel.recv(theirs.data(), theirs.size(), deadline);
  return theirs;
}
}  // namespace

// Both ends of a pair must pick the same path. Both read the same records
// and register the same paths, so they agree on which paths reach the peer
// and whether to talk about it at all; when some do, each end says which of
// them it lists before tcp, in its order, and the pair takes the first of
// the lower rank's list that the higher rank lists too. Both then set that
// path up, which gives a path at both ends or at neither (the socket then
// carries the data).
std::unique_ptr<DataPath> TcpTransport::attach_path(int peer, int fd, Deadline deadline) {
  const std::vector<std::string> order = data_path_order();
  const bool local = peers_[peer]->host_id == host_id();
  SetupChannel channel(fd, rank_, peer, local, describe_peer(peer), options_.label);
  std::vector<std::string> reach;  // the registered paths that reach the peer, by both ends' reckoning
  for (const std::string& name : known_data_paths())
    if (name != "tcp" && find_data_path(name)->reaches(channel)) reach.push_back(name);

  std::unique_ptr<DataPath> path;
  if (!reach.empty()) {
    std::string mine;
    for (const std::string& name : order) {
      if (name == "tcp") break;
      if (std::find(reach.begin(), reach.end(), name) != reach.end()) mine += (mine.empty() ? "" : ",") + name;
    }
    const std::string theirs = exchange_wishes(channel, mine, deadline);
    const std::vector<std::string> lower = split_names(rank_ < peer ? mine : theirs);
    const std::vector<std::string> higher = split_names(rank_ < peer ? theirs : mine);
    for (const std::string& name : lower) {
      if (std::find(higher.begin(), higher.end(), name) == higher.end()) continue;
      const DataPathFactory* factory = find_data_path(name);
      if (!factory)  // the peer runs a program that registers other paths
        throw DistNetworkError(options_.label + ": " + describe_peer(peer) + " picked data path '" + name +
                               "', which this rank does not know");
      path = factory->connect(channel, static_cast<PathHost&>(*this), deadline);
      break;
    }
  }
  if (path || std::find(order.begin(), order.end(), "tcp") != order.end()) return path;
  std::string why;
  for (const std::string& name : reach) why += (why.empty() ? "no " : " or ") + find_data_path(name)->description;
  why = !why.empty() ? why + " with it: see the warnings above, or its TDIST_TRANSPORTS"
        : local     ? "none of the listed paths reaches it"
                    : "it runs on another host, which only tcp reaches";
  throw DistValueError(options_.label + ": TDIST_TRANSPORTS=" + settings::text<"TDIST_TRANSPORTS">() +
                       " reaches no path to " + describe_peer(peer) + " (" + why + ")");
}

}  // namespace tdist
