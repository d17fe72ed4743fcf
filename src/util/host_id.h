// Identity of "this host" for placement decisions: ranks with equal host ids
// can reach each other through loopback and shared memory.
#pragma once

#include <string>

namespace tdist {

// hostname/boot-id/network-namespace; stable for the life of the process.
const std::string& host_id();
std::string hostname();

}  // namespace tdist
