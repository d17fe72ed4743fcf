#include "transport/tcp/tcp_silence.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>

#include "util/deadline.h"
#include "util/settings.h"
#include "util/socket.h"

namespace tdist::tcp {

namespace {

// Zero when unset.
std::chrono::milliseconds silence_limit() {
  return settings::get<"TDIST_PEER_SILENCE_TIMEOUT">().value_or(std::chrono::milliseconds(0));
}

}  // namespace

void watch_silence(int fd) {
  const long long ms = silence_limit().count();
  if (ms <= 0) return;
  // Keepalive's units are whole seconds: the first probe after half the
  // limit of quiet, then one a second; TCP_USER_TIMEOUT (milliseconds) is
  // what ends the connection, for probes and data alike.
  const int on = 1;
  const int idle = static_cast<int>(std::max<long long>(1, ms / 2000));
  const int interval = 1;
  const int count = 1000;  // never the limit: TCP_USER_TIMEOUT is
  const unsigned user_timeout = static_cast<unsigned>(std::min<long long>(ms, 86'400'000));
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
  ::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof(user_timeout));
}

std::string connection_error_text(int err) {
  const std::chrono::milliseconds limit = silence_limit();
  if (err == ETIMEDOUT && limit.count() > 0)
    return "its host did not answer for TDIST_PEER_SILENCE_TIMEOUT=" + format_ms(limit) +
           " (the host is down or the network between is cut)";
  return errno_string(err);
}

}  // namespace tdist::tcp
