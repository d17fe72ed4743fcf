// Which addresses a rank announces to its peers, and where its mesh listener
// binds: the interfaces of TDIST_SOCKET_IFNAME (torch's GLOO_SOCKET_IFNAME),
// else the route to MASTER_ADDR, else every interface.
#pragma once

#include <string>
#include <vector>

namespace tdist::tcp_addresses {

// TDIST_SOCKET_IFNAME's interfaces in the listed order (duplicates dropped);
// none when it is unset.
std::vector<std::string> listed_interfaces();
// "eth0,eth1", or "unset".
std::string listed_text(const std::vector<std::string>& names);

// Addresses other hosts may reach this rank at: those of the listed
// interfaces (in the listed order; `per_interface` gets each one's, IPv4
// first), or else of every interface that is up, loopback last.
// DistNetworkError naming a listed interface that is not up or has no address.
std::vector<std::string> local_addresses(const std::vector<std::string>& listed,
                                         std::vector<std::vector<std::string>>& per_interface);

// Where the mesh listener binds ("" for every interface), narrowing
// `addresses` to what it announces (see tcp_addresses.cpp).
std::string choose_bind_address(std::vector<std::string>& addresses);

bool has_loopback(const std::vector<std::string>& addresses);

}  // namespace tdist::tcp_addresses
