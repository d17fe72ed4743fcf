// Which local address a listener binds: the one the job uses, not every
// interface (a store or a rank on an interface the job does not use is only
// an open door). TDIST_BIND_ALL=1 binds every interface, as torch does.
#pragma once

#include <string>

namespace tdist {

// For a server that clients reach at `host` (MASTER_ADDR): host itself when
// it is a literal address of this machine or a loopback name, the address it
// names when that is a non-loopback address of this machine; otherwise every
// interface ("", with one log line saying why). "" too with TDIST_BIND_ALL=1.
std::string bind_address_for(const std::string& host);

// Whether `host` is a loopback address or name (127.0.0.0/8, ::1, localhost).
bool is_loopback_host(const std::string& host);

// The local address of the route to `host` (a UDP socket connected to it),
// or "" when there is none.
std::string local_address_towards(const std::string& host);

}  // namespace tdist
