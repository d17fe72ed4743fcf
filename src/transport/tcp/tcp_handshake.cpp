#include "transport/tcp/tcp_handshake.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "tdist/errors.h"
#include "util/job_token.h"
#include "util/logging.h"

namespace tdist::tcp_handshake {

namespace {

auth::Digest proof(const std::string& token, const char* purpose, const uint8_t* acceptor_nonce,
                   const uint8_t* dialler_nonce, const Identity& id) {
  auto nonce = [](const uint8_t* n) { return std::string_view(reinterpret_cast<const char*>(n), 16); };
  return auth::hmac(token, {purpose, nonce(acceptor_nonce), nonce(dialler_nonce), std::to_string(id.dialler),
                            std::to_string(id.acceptor), std::to_string(id.size), std::to_string(id.lane)});
}

constexpr const char* kDialPurpose = "tdist-mesh-dial";
constexpr const char* kAcceptPurpose = "tdist-mesh-accept";

bool same(const uint8_t* bytes, const auth::Digest& d) {
  auth::Digest got;
  std::memcpy(got.data(), bytes, got.size());
  return auth::equal(got, d);
}

constexpr const char* kTokenHint = "start every rank with the same TDIST_JOB_TOKEN or TDIST_JOB_TOKEN_FILE";

}  // namespace

Verdict dial(int fd, const Identity& id, uint64_t store_nonce, const std::optional<std::string>& token,
          Deadline deadline, const std::string& peer) {
  wire::Challenge challenge{};
  recv_all(fd, &challenge, sizeof(challenge), deadline, peer + " (waiting for its handshake)");
  if (challenge.magic != wire::kChallengeMagic)
    throw DistNetworkError(peer + " did not answer with a tdist handshake (magic 0x" + [&] {
      char buf[16];
      std::snprintf(buf, sizeof(buf), "%08x", challenge.magic);
      return std::string(buf);
    }() + "): another program, or another version of tdist, listens there");
  const bool wants_token = challenge.flags & wire::kChallengeWantsToken;
  if (wants_token && !token)
    throw DistNetworkError(peer + " requires the job token and this rank has none: " + kTokenHint);
  if (!wants_token && token)
    throw DistNetworkError(peer + " runs without a job token and this rank has one: " + kTokenHint);

  wire::Hello hello{};
  hello.magic = wire::kHelloMagic;
  hello.rank = static_cast<uint32_t>(id.dialler);
  hello.size = static_cast<uint32_t>(id.size);
  hello.lane = id.lane;
  hello.store_nonce = store_nonce;
  auth::Nonce mine = auth::random_nonce();
  std::memcpy(hello.nonce, mine.data(), mine.size());
  if (token) {
    auth::Digest d = proof(*token, kDialPurpose, challenge.nonce, hello.nonce, id);
    std::memcpy(hello.proof, d.data(), d.size());
  }
  send_all(fd, &hello, sizeof(hello), deadline, peer);

  wire::Welcome welcome{};
  recv_all(fd, &welcome, sizeof(welcome), deadline, peer + " (waiting for it to accept the handshake)");
  const bool proven_verdict =
      welcome.accepted == wire::kWelcomeAccepted || welcome.accepted == wire::kWelcomeSuperseded;
  if (welcome.magic == wire::kWelcomeMagic && welcome.accepted == wire::kWelcomeAlreadyConnected)
    throw DistNetworkError(peer + " says it is already connected to this rank (socket " + std::to_string(id.lane + 1) +
                           "): it kept an earlier connection that this rank no longer has");
  if (welcome.magic != wire::kWelcomeMagic || !proven_verdict)
    throw DistNetworkError(peer + " refused this rank's handshake: " +
                           (token ? std::string("the job tokens differ (") + kTokenHint + ")"
                                  : std::string("the address record this rank read from the store is not "
                                                "that rank's current one (a store of an earlier job?)")));
  if (token && !same(welcome.proof, proof(*token, kAcceptPurpose, challenge.nonce, hello.nonce, id)))
    throw DistNetworkError(peer + " did not prove that it knows the job token: it is not the rank it claims to be");
  return welcome.accepted == wire::kWelcomeAccepted ? Verdict::Accept : Verdict::Superseded;
}

// ---------------------------------------------------------------- acceptor

struct Acceptor::Pending {
  Fd fd;
  std::string address;
  Deadline deadline = Deadline::never();
  wire::Challenge challenge{};
  wire::Hello hello{};
  size_t got = 0;  // bytes of `hello` read so far
};

Acceptor::Acceptor(std::vector<int> listen_fds, int rank, int size, uint64_t store_nonce,
                   std::optional<std::string> token, std::string label, int wake_fd)
    : listen_fds_(std::move(listen_fds)),
      rank_(rank),
      size_(size),
      store_nonce_(store_nonce),
      token_(std::move(token)),
      label_(std::move(label)),
      wake_fd_(wake_fd) {
  for (int fd : listen_fds_) set_nonblocking(fd, true);
}

Acceptor::~Acceptor() = default;

void Acceptor::drop(size_t index, const std::string& why) {
  TDIST_LOG(LogLevel::Warn, label_ << ": dropped a connection from " << pending_[index].address << ": " << why);
  pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(index));
}

void Acceptor::accept_all(int listen_fd) {
  for (;;) {
    int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK)
        TDIST_LOG(LogLevel::Warn, label_ << ": accept failed: " << errno_string(errno));
      return;
    }
    Pending p;
    p.fd = Fd(fd);
    set_nodelay(fd);
    p.address = peer_address(fd);
    p.deadline = Deadline::after(kHandshakeTime);
    p.challenge.magic = wire::kChallengeMagic;
    p.challenge.flags = token_ ? wire::kChallengeWantsToken : 0;
    auth::Nonce n = auth::random_nonce();
    std::memcpy(p.challenge.nonce, n.data(), n.size());
    // A fresh socket's send buffer always holds these 24 bytes.
    if (::send(fd, &p.challenge, sizeof(p.challenge), MSG_NOSIGNAL | MSG_DONTWAIT) !=
        static_cast<ssize_t>(sizeof(p.challenge))) {
      TDIST_LOG(LogLevel::Warn, label_ << ": dropped a connection from " << p.address
                                       << ": could not send the handshake: " << errno_string(errno));
      continue;
    }
    pending_.push_back(std::move(p));
    // Full: a connection silent for over kPatience makes room (a rank's Hello
    // follows the challenge within milliseconds: this one is not a rank, or a
    // dead one); otherwise the rest wait in the listen backlog until a
    // handshake ends. Dropping the oldest at once failed jobs of over 64
    // ranks, whose connections all arrived together.
    if (pending_.size() >= kMaxPending) {
      if (pending_.front().deadline.remaining() > kHandshakeTime - kPatience) return;
      drop(0, "it was silent for " + format_ms(kPatience) + " while " + std::to_string(kMaxPending) +
                  " connections were in handshake");
    }
  }
}

bool Acceptor::read_hello(Pending& p, bool* gone) {
  auto* bytes = reinterpret_cast<char*>(&p.hello);
  for (;;) {
    ssize_t r = ::recv(p.fd.get(), bytes + p.got, sizeof(p.hello) - p.got, MSG_DONTWAIT);
    if (r > 0) {
      p.got += static_cast<size_t>(r);
      if (p.got == sizeof(p.hello)) return true;
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
    *gone = true;
    return false;
  }
}

std::optional<Accepted> Acceptor::finish(Pending& p, const Judge& judge) {
  const wire::Hello& h = p.hello;
  const int from = static_cast<int>(h.rank);
  const Identity id{from, rank_, size_, h.lane};
  std::string why;
  uint32_t verdict = wire::kWelcomeRefused;
  if (h.magic != wire::kHelloMagic) {
    why = "not a tdist handshake";
  } else if (static_cast<int>(h.size) != size_ || from < 0 || from == rank_ || from >= size_) {
    why = "it claims to be rank " + std::to_string(h.rank) + " of " + std::to_string(h.size) +
          ", which is not a peer of rank " + std::to_string(rank_) + " of " + std::to_string(size_);
  } else if (token_ && !same(h.proof, proof(*token_, kDialPurpose, p.challenge.nonce, h.nonce, id))) {
    why = "it claims to be rank " + std::to_string(from) + " but does not prove it knows the job token";
  } else if (h.store_nonce != store_nonce_) {
    why = "it claims to be rank " + std::to_string(from) + " but did not read this rank's current address record";
  } else {
    switch (judge(from, h.lane)) {
      case Verdict::Accept: verdict = wire::kWelcomeAccepted; break;
      case Verdict::Superseded: verdict = wire::kWelcomeSuperseded; break;
      case Verdict::AlreadyConnected:
        verdict = wire::kWelcomeAlreadyConnected;
        why = "it claims to be rank " + std::to_string(from) + " socket " + std::to_string(h.lane + 1) +
              ", which is already connected or not expected";
        break;
    }
  }
  wire::Welcome welcome{wire::kWelcomeMagic, verdict, {}};
  if (token_ && (verdict == wire::kWelcomeAccepted || verdict == wire::kWelcomeSuperseded)) {
    auth::Digest d = proof(*token_, kAcceptPurpose, p.challenge.nonce, h.nonce, id);
    std::memcpy(welcome.proof, d.data(), d.size());
  }
  // Best effort for a refusal: the refused dialler learns why from its own side.
  bool sent = ::send(p.fd.get(), &welcome, sizeof(welcome), MSG_NOSIGNAL | MSG_DONTWAIT) ==
              static_cast<ssize_t>(sizeof(welcome));
  if (!why.empty()) {
    TDIST_LOG(LogLevel::Warn, label_ << ": refused a connection from " << p.address << ": " << why);
    return std::nullopt;
  }
  if (verdict == wire::kWelcomeSuperseded) return std::nullopt;  // the dialler takes this rank's connection
  if (!sent) {
    TDIST_LOG(LogLevel::Warn, label_ << ": dropped a connection from " << p.address
                                     << " (rank " << from << "): could not answer its handshake");
    return Accepted{Fd(), from, h.lane, p.address};
  }
  set_nonblocking(p.fd.get(), false);
  return Accepted{std::move(p.fd), from, h.lane, p.address};
}

std::optional<Accepted> Acceptor::next(Deadline deadline, const Judge& judge) {
  std::vector<pollfd> fds;
  for (;;) {
    for (size_t i = pending_.size(); i-- > 0;)
      if (pending_[i].deadline.expired())
        drop(i, "it did not complete the handshake within " + format_ms(kHandshakeTime) +
                    " (not a rank of this job?)");
    Deadline wake = deadline;
    fds.clear();
    // While the handshakes are full, the listeners are not asked (fd -1 is
    // skipped) until the oldest has been silent for kPatience.
    bool full = false;
    if (pending_.size() >= kMaxPending) {
      const Deadline impatient = pending_.front().deadline.sooner(kHandshakeTime - kPatience);
      full = !impatient.expired();
      wake = wake.earlier(impatient);
    }
    for (int fd : listen_fds_) fds.push_back(pollfd{full ? -1 : fd, POLLIN, 0});
    for (const Pending& p : pending_) {
      fds.push_back(pollfd{p.fd.get(), POLLIN, 0});
      wake = wake.earlier(p.deadline);
    }
    if (wake_fd_ >= 0) fds.push_back(pollfd{wake_fd_, POLLIN, 0});
    int rc = ::poll(fds.data(), fds.size(), wake.poll_ms());
    if (rc < 0 && errno != EINTR)
      throw DistNetworkError(label_ + ": poll while accepting connections failed: " + errno_string(errno));
    // Stopped: the pending handshakes are moot (and a dialler that heard of
    // the stop may close its half-done one: that is no warning).
    if (rc > 0 && wake_fd_ >= 0 && fds.back().revents) return std::nullopt;
    if (rc > 0) {
      // Pending connections first (indices still match fds), then new ones.
      const size_t listeners = listen_fds_.size();
      for (size_t i = pending_.size(); i-- > 0;) {
        if (!fds[i + listeners].revents) continue;
        bool gone = false;
        if (read_hello(pending_[i], &gone)) {
          Pending p = std::move(pending_[i]);
          pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
          if (auto a = finish(p, judge)) return a;
        } else if (gone && pending_[i].got == 0) {
          // Closed before a byte: a survivor's liveness probe
          // (TcpTransport::peers_refusing) or a port scan, not a failed peer.
          TDIST_LOG(LogLevel::Debug, label_ << ": a connection from " << pending_[i].address
                                            << " closed before sending anything");
          pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
        } else if (gone) {
          drop(i, "it closed the connection during the handshake");
        }
      }
      for (size_t l = 0; l < listeners; ++l)
        if (fds[l].revents) accept_all(listen_fds_[l]);
    }
    if (deadline.expired()) return std::nullopt;
  }
}

}  // namespace tdist::tcp_handshake
