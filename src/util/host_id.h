// Identity of "this host" for placement decisions: ranks with equal host ids
// can reach each other through loopback and shared memory.
#pragma once

#include <string>

namespace tdist {

// hostname/boot-id/network-namespace; stable for the life of the process.
const std::string& host_id();
std::string hostname();
// The machine a host id is on: its boot id, which hosts in network namespaces
// or containers of one machine share. An id given with TDIST_HOST_ID names
// its own machine (it says nothing of where it runs).
std::string machine_of(const std::string& host_id);

}  // namespace tdist
