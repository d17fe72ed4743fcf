// A new client of the TCPStore server: torch's client is told apart by its
// first bytes, ours says hello and, where the job has a token, proves it.
#include "store/tcp_store_server_loop.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "util/bind_address.h"

namespace tdist::store_detail {

bool TcpStoreServer::Loop::probe_first_bytes(Conn& c, const char* data, size_t n) {
  c.head.append(data, n);
  const FirstBytes what = classify_first_bytes(c.head.substr(0, kTorchProbeBytes));
  if (what == FirstBytes::kNeedMore) return true;
  c.dialect_known = true;
  if (what == FirstBytes::kOther) return true;
  if (what == FirstBytes::kTorch2Client) {
    if (admits_torch_client(c)) {
      c.torch = true;
      return true;
    }
    const char* policy = limits.torch_clients == StoreLimits::TorchClients::kRefuse ? "REFUSE" : "LOCAL";
    const std::string why = std::string("a torch.distributed client, which cannot prove the job token this store "
                                        "requires (TDIST_STORE_TORCH_CLIENTS=") + policy + ")";
    // Said once at Warn: a stranger retrying must not fill the log.
    drop(c, torch_refusal_said ? LogLevel::Debug : LogLevel::Warn,
         why + (torch_refusal_said ? "" : "; TDIST_STORE_TORCH_CLIENTS=ALL on the store's host admits torch's "
                                          "clients from anywhere, LOCAL those of this machine"));
    torch_refusal_said = true;
    return false;
  }
  // torch 1.x: an older protocol, without VALIDATE. Left to the parser, it
  // would be dropped as malformed, and torch would say only "Connection reset
  // by peer": the one who launched the job hears why here.
  if (!torch_client_seen) {
    torch_client_seen = true;
    TDIST_LOG(LogLevel::Warn,
              name << ": a torch 1.x TCPStore client connected from " << c.peer
                   << "; this store speaks torch 2.x's protocol and tdist's, not torch 1.x's: add \"import "
                      "tdist.torch\" to the program (its env:// then joins this store through tdist's client), or "
                      "use torch 2.x");
  }
  drop(c, LogLevel::Debug, "a torch 1.x TCPStore client (an older protocol)");
  return false;
}

// A torch client cannot prove the job token: admitted where the store has
// none, else as TDIST_STORE_TORCH_CLIENTS says (LOCAL: from an address of
// this machine, which a connection to one of them comes from).
bool TcpStoreServer::Loop::admits_torch_client(const Conn& c) const {
  if (!token) return true;
  switch (limits.torch_clients) {
    case StoreLimits::TorchClients::kAll:
      return true;
    case StoreLimits::TorchClients::kRefuse:
      return false;
    case StoreLimits::TorchClients::kLocal: {
      const std::string peer = peer_host(c.fd.get());
      return !peer.empty() && (is_loopback_host(peer) || peer == local_host(c.fd.get()));
    }
  }
  return false;
}


void TcpStoreServer::Loop::greet(Conn& c, Request& req) {
  if (req.command != Command::kHello || req.arg != kMagic || req.values[0].size() != c.client_nonce.size())
    return drop(c, LogLevel::Warn, "the first request is not a TCPStore hello of this version (not a TCPStore client?)");
  c.greeted = true;
  std::memcpy(c.client_nonce.data(), req.values[0].data(), c.client_nonce.size());
  c.server_nonce = auth::random_nonce();
  Response r;
  r.num = kVersion;
  r.values.emplace_back(auth::view(c.server_nonce));
  r.values.emplace_back(token ? "token" : "open");
  if (token) {
    auth::Digest d = auth::hmac(*token, {"tdist-store-server", auth::view(c.client_nonce), auth::view(c.server_nonce)});
    r.values.emplace_back(reinterpret_cast<const char*>(d.data()), d.size());
  } else {
    c.authenticated = true;
  }
  respond(c, r);
}

bool TcpStoreServer::Loop::authenticate(Conn& c, const Request& req) {
  auth::Digest want =
      auth::hmac(*token, {"tdist-store-client", auth::view(c.client_nonce), auth::view(c.server_nonce)});
  auth::Digest got{};
  bool ok = req.command == Command::kAuth && req.values.size() == 1 && req.values[0].size() == got.size();
  if (ok) std::memcpy(got.data(), req.values[0].data(), got.size());
  if (!ok || !auth::equal(got, want)) {
    TDIST_LOG(LogLevel::Warn, name << ": refused client " << c.peer << ": "
                                   << (req.command == Command::kAuth ? "its proof of the job token is wrong"
                                                                     : "it sent a request before authenticating"));
    c.closing_after_flush = true;
    respond_error(c, "this TCPStore requires the job token, and the client's proof of it is wrong or missing "
                     "(every process of a job needs the same TDIST_JOB_TOKEN or TDIST_JOB_TOKEN_FILE)");
    return false;
  }
  c.authenticated = true;
  respond(c, Response{});
  return true;
}

}  // namespace tdist::store_detail
