// Rank 1 of a group of two played by hand over raw sockets, next to a real
// TcpTransport as rank 0: tests write the frames a peer would (or would not)
// write, in any order and cut anywhere, and read what rank 0 answers.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "common/scoped_env.h"
#include "tdist/errors.h"
#include "tdist/store.h"
#include "transport/request.h"
#include "transport/tcp/tcp_handshake.h"
#include "transport/tcp/tcp_transport.h"
#include "transport/wire.h"
#include "util/job_token.h"
#include "util/socket.h"

namespace tdist::testing {

class HandPlayedPeer {
 public:
  // `sockets`: the connections per peer both ranks ask for (main one first).
  explicit HandPlayedPeer(int sockets = 1) : sockets_env_("TDIST_SOCKETS_PER_PEER", std::to_string(sockets)) {
    options_.label = "rank 0";
    options_.timeout = std::chrono::seconds(20);
    std::thread rank0([&] { transport = TcpTransport::connect(store_, 0, 2, options_); });
    store_.wait({"tcp/0"}, std::chrono::seconds(20));
    std::string record = store_.get("tcp/0");  // host, nonce, port, addresses, sockets
    std::vector<std::string> lines;
    for (size_t at = 0; at <= record.size();) {
      size_t end = std::min(record.find('\n', at), record.size());
      lines.push_back(record.substr(at, end - at));
      at = end + 1;
    }
    const uint64_t nonce = std::stoull(lines.at(1));
    const uint16_t port = static_cast<uint16_t>(std::stoul(lines.at(2)));
    store_.set("tcp/1", "another-host\n1\n1\n127.0.0.1\n" + std::to_string(sockets));
    const auto token = auth::job_token();
    main_socket = connect_tcp("127.0.0.1", port, deadline(), "hand-played rank 1");
    tcp_handshake::dial(main_socket.get(), {1, 0, 2, 0}, nonce, token, deadline(), "rank 0");
    for (int lane = 1; lane < sockets; ++lane) {
      extra.push_back(connect_tcp("127.0.0.1", port, deadline(), "hand-played rank 1"));
      tcp_handshake::dial(extra.back().get(), {1, 0, 2, static_cast<uint32_t>(lane)}, nonce, token, deadline(),
                          "rank 0");
    }
    rank0.join();
  }
  static Deadline deadline() { return Deadline::after(std::chrono::seconds(20)); }
  void write(Fd& fd, const wire::MessageHeader& h, const void* payload = nullptr, size_t n = 0) {
    send_all(fd.get(), &h, sizeof(h), deadline(), "rank 0");
    write_bytes(fd, payload, n);
  }
  void write_bytes(Fd& fd, const void* payload, size_t n) {
    if (n > 0) send_all(fd.get(), payload, n, deadline(), "rank 0");
  }
  // Rank 1 gives up, as a real rank would: says why, then closes its main socket.
  void say_goodbye(const std::string& why) {
    write(main_socket, wire::MessageHeader{wire::kAbortMagic, 0, 0, why.size()}, why.data(), why.size());
    main_socket.reset();
  }
  // Waits for rank 0's request `r`, which must succeed.
  void wait(Request& r) { transport->wait(r, deadline(), /*abort_on_error=*/false); }
  // Waits for rank 0's request `r`, which must fail: the error's text ("" and
  // a test failure when it succeeded).
  std::string failure_of(Request& r) {
    try {
      wait(r);
    } catch (const DistError& e) {
      return e.what();
    }
    ADD_FAILURE() << "a request of rank 0 succeeded that should have failed";
    return "";
  }
  // The next frame rank 0 writes on the main socket (a clear-to-send here).
  wire::MessageHeader read_header() {
    wire::MessageHeader h{};
    recv_all(main_socket.get(), &h, sizeof(h), deadline(), "rank 0");
    return h;
  }

  std::unique_ptr<TcpTransport> transport;
  Fd main_socket;
  std::vector<Fd> extra;

 private:
  ScopedEnv shm_{"TDIST_SHM", "0"};
  ScopedEnv sockets_env_;
  HashStore store_;
  TcpTransportOptions options_;
};

}  // namespace tdist::testing
