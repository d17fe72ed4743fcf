#include "util/bind_address.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "util/settings.h"
#include "util/logging.h"
#include "util/socket.h"

namespace tdist {

namespace {

// The addresses `host` resolves to, as text.
std::vector<std::string> resolve(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  std::vector<std::string> out;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0) return out;
  for (addrinfo* a = res; a; a = a->ai_next) {
    char buf[INET6_ADDRSTRLEN] = {0};
    if (a->ai_family == AF_INET)
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr, buf, sizeof(buf));
    else if (a->ai_family == AF_INET6)
      inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr, buf, sizeof(buf));
    if (buf[0]) out.emplace_back(buf);
  }
  ::freeaddrinfo(res);
  return out;
}

bool is_literal(const std::string& host) {
  in6_addr six{};
  in_addr four{};
  return inet_pton(AF_INET, host.c_str(), &four) == 1 || inet_pton(AF_INET6, host.c_str(), &six) == 1;
}

// Whether this machine can bind `address` (one of its own).
bool is_local(const std::string& address) {
  try {
    listen_tcp(address, 0, 1);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

bool is_loopback_host(const std::string& host) {
  if (host == "localhost" || host == "::1") return true;
  in_addr a{};
  return inet_pton(AF_INET, host.c_str(), &a) == 1 && (ntohl(a.s_addr) >> 24) == 127;
}

std::string local_address_towards(const std::string& host) {
  for (const std::string& address : resolve(host)) {
    const bool six = address.find(':') != std::string::npos;
    Fd fd(::socket(six ? AF_INET6 : AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (!fd.valid()) continue;
    sockaddr_storage ss{};
    socklen_t len = 0;
    if (six) {
      auto* s6 = reinterpret_cast<sockaddr_in6*>(&ss);
      s6->sin6_family = AF_INET6;
      s6->sin6_port = htons(9);
      inet_pton(AF_INET6, address.c_str(), &s6->sin6_addr);
      len = sizeof(*s6);
    } else {
      auto* s4 = reinterpret_cast<sockaddr_in*>(&ss);
      s4->sin_family = AF_INET;
      s4->sin_port = htons(9);
      inet_pton(AF_INET, address.c_str(), &s4->sin_addr);
      len = sizeof(*s4);
    }
    // A UDP connect sends nothing: it only asks the kernel for the route.
    if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&ss), len) != 0) continue;
    std::string local = local_host(fd.get());
    if (!local.empty()) return local;
  }
  return "";
}

std::string bind_address_for(const std::string& host) {
  if (settings::get<"TDIST_BIND_ALL">() || host.empty() || host == "*") return "";
  if (is_loopback_host(host)) return host == "localhost" ? "127.0.0.1" : host;
  if (is_literal(host)) {
    if (is_local(host)) return host;
    TDIST_LOG(LogLevel::Info, host << " is not an address of this machine (behind NAT?): listening on every interface");
    return "";
  }
  for (const std::string& address : resolve(host))
    if (!is_loopback_host(address) && is_local(address)) return address;
  // A name that resolves to loopback here (Debian's 127.0.1.1 for the
  // hostname) may resolve to a real address on the other hosts.
  TDIST_LOG(LogLevel::Info, host << " names no non-loopback address of this machine: listening on every interface");
  return "";
}

}  // namespace tdist
