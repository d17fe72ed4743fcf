// TDIST_PEER_SILENCE_TIMEOUT: a connection to a peer on another host fails
// once that host has not answered for the timeout, so that a host that lost
// power or a pulled cable is found without a short group timeout.
#pragma once

#include <string>

namespace tdist::tcp {

// Makes `fd` fail with ETIMEDOUT after TDIST_PEER_SILENCE_TIMEOUT without an
// answer from the peer's host: keepalive probes while it is idle, and
// TCP_USER_TIMEOUT for data it does not acknowledge. Nothing when unset.
void watch_silence(int fd);

// Why a connection failed with `err`, for its error: ETIMEDOUT with the
// setting on says that the peer's host stopped answering, and for how long.
std::string connection_error_text(int err);

}  // namespace tdist::tcp
