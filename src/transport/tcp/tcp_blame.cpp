// Blaming a stall. When one rank stops (SIGSTOP, a long page-in, a debugger),
// the ranks waiting for it are often not the only ones that time out: a rank
// waiting for one of those times out too, at about the same moment, since
// every rank's deadline counts from the start of the same collective. Each
// would name the rank it waited for, which is healthy but was itself waiting.
//
// So a rank that gives up tells every peer whom it waited for (the notice's
// `reserved` field), keeps reading for a short grace period to hear the
// others' notices, then follows the chain of waits: the rank it waited for,
// the rank that one waited for, and so on. The chain ends at a rank that sent
// nothing (the stalled or dead one), at a rank that failed for another reason
// (its own message says why), or back at a rank already on it (the ranks wait
// for each other: they called different operations).
#include <algorithm>
#include <string>
#include <sys/socket.h>
#include <vector>

#include "tdist/errors.h"
#include "transport/tcp/tcp_peer.h"
#include "transport/tcp/tcp_transport.h"
#include "util/error_context.h"

namespace tdist {

namespace {
constexpr Millis kListenSlice{10};
}  // namespace

void TcpTransport::send_notice_locked(Peer& p, int waited_for, const std::string& why) {
  write_notice_locked(p, static_cast<uint32_t>(waited_for + 1), why);
}

void TcpTransport::send_goodbye_locked(Peer& p) { write_notice_locked(p, wire::kNoticeGoodbye, kLeftByDestroy); }

std::exception_ptr TcpTransport::notice_error(const Peer& p, uint32_t reserved, const std::string& text) const {
  if (reserved == wire::kNoticeGoodbye)
    return std::make_exception_ptr(DistNetworkError(peer_left_text(describe_peer(p.rank), text)));
  return std::make_exception_ptr(
      DistNetworkError(describe_peer(p.rank) + " gave up and closed its connections: " + text));
}

void TcpTransport::write_notice_locked(Peer& p, uint32_t reserved, const std::string& why) {
  // Only between two messages: a ring peer's socket carries whole control
  // frames only; a socket whose message was cut off carries nothing more.
  if (p.notice_sent || !p.fd.valid() || p.tx_torn) return;
  if (!p.path && !p.txq.empty() && p.txq.front().sent > 0) return;
  p.notice_sent = true;
  std::string text = why.substr(0, wire::kMaxAbortText);
  wire::MessageHeader h{wire::kAbortMagic, reserved, 0, text.size()};
  iovec iov[2] = {{&h, sizeof(h)}, {text.data(), text.size()}};
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = 2;
  [[maybe_unused]] ssize_t w = ::sendmsg(p.fd.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
}

void TcpTransport::record_notice(Peer& p, uint32_t waited_for_plus_1, const std::string& text) {
  p.notice_heard = true;
  // A rank number from the wire: anything out of range is taken as "none".
  const int waited_for = waited_for_plus_1 >= 1 && waited_for_plus_1 <= static_cast<uint32_t>(size_)
                             ? static_cast<int>(waited_for_plus_1) - 1
                             : -1;
  std::lock_guard<std::mutex> lock(mu_);
  notices_[p.rank] = Notice{true, waited_for == p.rank ? -1 : waited_for, text,
                            waited_for_plus_1 == wire::kNoticeGoodbye};
}

std::string TcpTransport::explain_stall(int peer, Deadline deadline, const std::string& what, bool timed_out) {
  if (peer < 0 || peer >= size_ || peer == rank_) return what;
  for (auto& p : peers_) {
    if (!p || !p->connected.load(std::memory_order_acquire)) continue;
    std::lock_guard<std::mutex> tx(p->tx_mu);
    send_notice_locked(*p, peer, what);
  }
  // Listen by driving the transport for a request that never completes.
  const Millis grace = stall_grace(deadline.timeout());
  const Deadline until = Deadline::after(grace);
  Request listen(Request::Kind::Recv, rank_, 0, nullptr, 0);
  bool settled = false;
  while (!stop_.load(std::memory_order_acquire) && !until.expired()) {
    chain_of_waits(peer, timed_out, settled);
    if (settled) break;
    drive(listen, Deadline::after(std::min(kListenSlice, until.remaining())));
  }
  std::string chain = chain_of_waits(peer, timed_out, settled);
  if (!settled && chain.empty()) return what + " (the peer may be stalled, dead, or in a different operation)";
  if (!settled) chain += " in the " + format_ms(grace) + " after this rank gave up)";
  return what + chain;
}

// The explanation to append, from the notices heard so far. `settled`: the
// chain ends in a way more notices cannot change (a failure, a cycle).
std::string TcpTransport::chain_of_waits(int peer, bool timed_out, bool& settled) const {
  std::vector<Notice> heard;
  {
    std::lock_guard<std::mutex> lock(mu_);
    heard = notices_;
  }
  std::vector<int> chain{peer};
  bool cycle = false;
  for (int w = peer; heard[w].heard && heard[w].waited_for >= 0;) {
    w = heard[w].waited_for;
    cycle = w == rank_ || std::find(chain.begin(), chain.end(), w) != chain.end();
    chain.push_back(w);
    if (cycle) break;
  }
  const int end = chain.back();
  settled = cycle || (heard[end].heard && heard[end].waited_for < 0);
  if (chain.size() == 1) {
    // The peer sent nothing, or gave up without waiting for anyone; after a
    // timeout, say why it gave up (after a failure the caller's text has it).
    if (!timed_out || !heard[end].heard) return "";
    return "; " + name_peer(end) + (heard[end].left ? " left the group: " : " gave up: ") + heard[end].text;
  }
  std::string out = "; " + name_peer(chain[0]) + " was itself waiting for ";
  for (size_t i = 1; i < chain.size(); ++i) {
    if (i > 1) out += ", which was waiting for ";
    out += chain[i] == rank_ ? std::string("this rank") : name_peer(chain[i]);
  }
  if (cycle)
    return out + ": the ranks wait for each other in a cycle (they called different collectives, or the same "
                 "one with different arguments)";
  if (heard[end].heard)
    return out + (heard[end].left ? ", which left the group: " : ", which gave up: ") + heard[end].text;
  return out + ": " + describe_peer(end) + " is stalled, dead, or in a different operation (it sent nothing";
}

}  // namespace tdist
