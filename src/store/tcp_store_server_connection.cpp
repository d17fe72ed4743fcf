// One connection of the TCPStore server: reading its requests (fairly,
// large values straight into place), sending its answers, and dropping it.
#include "store/tcp_store_server_loop.h"

#include <sys/epoll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <string>

namespace tdist::store_detail {

namespace {

constexpr size_t kDirectChunk = 1 << 20;    // receive large values straight into place, 1 MiB at a time
constexpr size_t kReadBudget = 4 << 20;     // bytes read from one connection per wakeup (fairness)
constexpr size_t kMaxGreetingBytes = 4096;  // what a client may send before it has authenticated

}  // namespace

void TcpStoreServer::Loop::update_interest(Conn& c) {
  if (c.closing) return;
  uint32_t want = EPOLLRDHUP;
  if (c.writing()) want |= EPOLLOUT;
  else if (c.waiter == 0 || c.torch) want |= EPOLLIN;  // torch's client may cancel its parked wait
  if (want == c.events) return;
  epoll_event ev{};
  ev.events = want;
  ev.data.u64 = c.id;
  if (::epoll_ctl(epoll.get(), EPOLL_CTL_MOD, c.fd.get(), &ev) != 0)
    return drop(c, LogLevel::Warn, "epoll_ctl failed: " + errno_string(errno));
  c.events = want;
}

void TcpStoreServer::Loop::drop(Conn& c, LogLevel level, const std::string& why) {
  if (c.closing) return;
  TDIST_LOG(level, name << ": dropping client " << c.peer << ": " << why);
  c.closing = true;
  if (c.waiter != 0) remove_waiter(c.waiter);
  c.waiter = 0;
  ::epoll_ctl(epoll.get(), EPOLL_CTL_DEL, c.fd.get(), nullptr);
  c.fd.reset();
  // Buffers go now, the object at the end of the iteration (callers may hold it).
  buffered -= c.out.size() - c.out_pos;
  std::string().swap(c.in);
  std::string().swap(c.out);
  c.parser = RequestParser();
  c.torch_parser = TorchRequestParser();
  to_close.push_back(c.id);
}

// Reads and serves requests until the connection has to wait: for the
// socket, for its answer to be sent, or for a parked request.
void TcpStoreServer::Loop::pump(Conn& c) {
  // A torch client's parked wait does not stop its reading (it may cancel it: feed_torch).
  auto busy = [&] { return c.closing || (c.waiter != 0 && !c.torch) || c.writing(); };
  // Feeds bytes to the parser, serving each complete request; what is left
  // when the connection becomes busy is kept for later. False: dropped.
  auto feed_tdist = [&](const char* data, size_t n) {
    size_t pos = 0;
    while (pos < n && !busy()) {
      size_t used = 0;
      auto r = c.parser.feed(data + pos, n - pos, &used);
      pos += used;
      if (r == RequestParser::Result::kError) {
        drop(c, LogLevel::Info, "malformed request: " + c.parser.error());
        return false;
      }
      if (r == RequestParser::Result::kDone) handle(c, c.parser.take());
    }
    if (pos < n && !c.closing) c.in.append(data + pos, n - pos);  // at most one read's worth
    return !c.closing;
  };
  auto feed = [&](const char* data, size_t n) {
    if (!c.dialect_known) {
      if (!probe_first_bytes(c, data, n)) return false;
      if (!c.dialect_known) return true;  // c.head keeps the bytes until more of them decide
      const std::string first = std::move(c.head);
      c.head = std::string();
      return c.torch ? feed_torch(c, first.data(), first.size()) : feed_tdist(first.data(), first.size());
    }
    return c.torch ? feed_torch(c, data, n) : feed_tdist(data, n);
  };
  if (c.torch && !busy() && !feed_torch(c, nullptr, 0)) return;  // requests that came while it was busy
  if (c.in_pos < c.in.size() && !busy()) {
    std::string pending = std::move(c.in);
    size_t from = c.in_pos;
    c.in.clear();
    c.in_pos = 0;
    if (!feed(pending.data() + from, pending.size() - from)) return;
  }
  size_t budget = kReadBudget;
  while (!busy() && budget > 0) {
    if (!c.authenticated && c.greeting_bytes > kMaxGreetingBytes)
      return drop(c, LogLevel::Warn, "sent " + std::to_string(c.greeting_bytes) + " bytes without authenticating");
    ssize_t n;
    size_t remaining = 0;
    if (std::string* value = c.parser.value_in_progress(&remaining); value != nullptr && remaining >= kReadChunk) {
      // A large value: receive straight into it, never more than announced.
      size_t chunk = std::min({remaining, kDirectChunk, budget});
      size_t old = value->size();
      value->resize(old + chunk);
      n = ::recv(c.fd.get(), value->data() + old, chunk, MSG_DONTWAIT);
      value->resize(old + static_cast<size_t>(std::max<ssize_t>(n, 0)));
      if (n > 0 && !c.authenticated) c.greeting_bytes += static_cast<size_t>(n);
      if (n > 0) {
        budget -= std::min(budget, static_cast<size_t>(n));
        if (c.parser.committed(static_cast<size_t>(n)) == RequestParser::Result::kDone) handle(c, c.parser.take());
        continue;
      }
    } else {
      n = ::recv(c.fd.get(), scratch.data(), scratch.size(), MSG_DONTWAIT);
      if (n > 0 && !c.authenticated) c.greeting_bytes += static_cast<size_t>(n);
      if (n > 0) {
        budget -= std::min(budget, static_cast<size_t>(n));
        if (!feed(scratch.data(), static_cast<size_t>(n))) return;
        continue;
      }
    }
    if (n == 0) {
      if (c.parser.in_progress() || c.torch_parser.buffered() > 0) return drop(c, LogLevel::Info, "disconnected in the middle of a request");
      return drop(c, LogLevel::Debug, "disconnected");
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) break;
    return drop(c, LogLevel::Debug, "receive failed: " + errno_string(errno));
  }
  update_interest(c);
}


void TcpStoreServer::Loop::flush(Conn& c) {
  while (c.writing()) {
    ssize_t n = ::send(c.fd.get(), c.out.data() + c.out_pos, c.out.size() - c.out_pos, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      c.out_pos += static_cast<size_t>(n);
      buffered -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    return drop(c, LogLevel::Debug, "send failed: " + errno_string(errno));
  }
  if (!c.writing()) {
    c.out.clear();
    c.out_pos = 0;
    if (c.out.capacity() > kReadChunk) std::string().swap(c.out);
    if (c.closing_after_flush) return drop(c, LogLevel::Debug, "refused");
  }
  update_interest(c);
}

// torch's clients are answered here only when a parked WAIT or BARRIER
// completes (their other answers: serve_torch); they have no error answer.
void TcpStoreServer::Loop::respond(Conn& c, const Response& r) {
  if (c.torch) {
    if (r.status != Status::kOk)
      return drop(c, LogLevel::Warn, r.values.empty() ? std::string("its request failed") : r.values[0]);
    return send_bytes(c, std::string(1, static_cast<char>(kTorchStopWaiting)));
  }
  send_bytes(c, encode_response(r));
}

void TcpStoreServer::Loop::send_bytes(Conn& c, const std::string& bytes) {
  if (c.closing) return;
  if (!c.writing()) {
    c.out.clear();
    c.out_pos = 0;
  }
  buffered += bytes.size();
  c.out += bytes;
  flush(c);
}

void TcpStoreServer::Loop::respond_error(Conn& c, std::string message) {
  if (c.torch) return drop(c, LogLevel::Warn, message);  // torch's protocol has no error answer
  Response r;
  r.status = Status::kError;
  r.values.push_back(std::move(message));
  respond(c, r);
}

// Whether the client has hung up (or its socket failed), though the loop may
// not have read that yet: a client sends nothing while it waits for an
// answer, so an end of stream next in its socket means it is gone.
bool TcpStoreServer::Loop::hung_up(Conn& c) {
  char byte;
  ssize_t peeked = ::recv(c.fd.get(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return peeked == 0 || (peeked < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

}  // namespace tdist::store_detail
