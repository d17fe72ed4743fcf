// Which addresses a rank announces and where its mesh listener binds
// (TDIST_SOCKET_IFNAME, MASTER_ADDR's route, TDIST_BIND_ALL).
#include "transport/tcp/tcp_addresses.h"

#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <algorithm>
#include <sstream>

#include "tdist/errors.h"
#include "util/bind_address.h"
#include "util/settings.h"

namespace tdist::tcp_addresses {

namespace {

// The addresses of every interface that is up, by name: IPv4 before IPv6,
// loopback interfaces flagged.
struct InterfaceAddresses {
  std::vector<std::string> addresses;
  bool loopback = false;
};
std::vector<std::pair<std::string, InterfaceAddresses>> interfaces_up() {
  std::vector<std::pair<std::string, InterfaceAddresses>> out;
  ifaddrs* head = nullptr;
  if (getifaddrs(&head) != 0) return out;
  for (int family : {AF_INET, AF_INET6})
    for (ifaddrs* a = head; a != nullptr; a = a->ifa_next) {
      if (!a->ifa_addr || !(a->ifa_flags & IFF_UP) || a->ifa_addr->sa_family != family) continue;
      char buf[INET6_ADDRSTRLEN] = {0};
      if (family == AF_INET) {
        inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, buf, sizeof(buf));
      } else {
        auto* in6 = reinterpret_cast<sockaddr_in6*>(a->ifa_addr);
        if (IN6_IS_ADDR_LINKLOCAL(&in6->sin6_addr)) continue;  // needs a scope id; skip
        inet_ntop(AF_INET6, &in6->sin6_addr, buf, sizeof(buf));
      }
      auto it = std::find_if(out.begin(), out.end(), [&](const auto& e) { return e.first == a->ifa_name; });
      if (it == out.end()) it = out.insert(out.end(), {a->ifa_name, {}});
      it->second.addresses.push_back(buf);
      it->second.loopback = (a->ifa_flags & IFF_LOOPBACK) != 0;
    }
  freeifaddrs(head);
  return out;
}

}  // namespace

// TDIST_SOCKET_IFNAME's interfaces (torch's GLOO_SOCKET_IFNAME where it is
// unset), in the listed order; none when neither is set.
std::vector<std::string> listed_interfaces() {
  std::vector<std::string> names;
  if (auto wanted = settings::get<"TDIST_SOCKET_IFNAME">())
    for (std::string& n : *wanted)
      if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(std::move(n));
  return names;
}

std::string listed_text(const std::vector<std::string>& names) {
  if (names.empty()) return "unset";
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) out += (i ? "," : "") + names[i];
  return out;
}

// Addresses other hosts may reach us at: those of the listed interfaces (in
// the listed order), or else of every interface that is up, loopback last.
// `per_interface` gets each listed interface's addresses. DistNetworkError
// naming a listed interface that is not up or has no address.
std::vector<std::string> local_addresses(const std::vector<std::string>& listed,
                                         std::vector<std::vector<std::string>>& per_interface) {
  const auto up = interfaces_up();
  std::vector<std::string> out, loopback;
  if (!listed.empty()) {
    for (const std::string& name : listed) {
      auto it = std::find_if(up.begin(), up.end(), [&](const auto& e) { return e.first == name; });
      if (it == up.end())
        throw DistNetworkError("TDIST_SOCKET_IFNAME=" + listed_text(listed) + ": interface " + name +
                               " is not up or has no address");
      per_interface.push_back(it->second.addresses);
      out.insert(out.end(), it->second.addresses.begin(), it->second.addresses.end());
    }
    return out;
  }
  for (const auto& [name, found] : up) {
    auto& into = found.loopback ? loopback : out;
    into.insert(into.end(), found.addresses.begin(), found.addresses.end());
  }
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
  if (settings::get<"TDIST_BIND_ALL">()) return "";
  if (settings::get<"TDIST_SOCKET_IFNAME">()) return addresses.front();
  auto master = settings::get<"MASTER_ADDR">();
  if (!master) return "";
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

}  // namespace tdist::tcp_addresses
