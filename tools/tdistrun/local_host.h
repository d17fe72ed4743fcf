// Whether a host name or address is one of this machine's: the agent on the
// rendezvous endpoint's machine hosts the store, the others connect to it.
#pragma once

#include <string>

namespace tdistrun {

// True when some address `host` resolves to can be bound here (it belongs to
// one of this machine's interfaces, loopback included).
bool is_local_host(const std::string& host);

}  // namespace tdistrun
