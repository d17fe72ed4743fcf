// What a TCPStore asks of its connections to the server: one request and its
// answer in tdist's terms (tcp_store_protocol.h), whichever protocol carries
// them: tdist's own (tcp_store.cpp) or torch's (torch_store_client.cpp, for a
// torch.distributed server such as torchrun's agent store).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "store/tcp_store_protocol.h"
#include "util/deadline.h"

namespace tdist::store_detail {

class StoreClient {
 public:
  virtual ~StoreClient() = default;
  // "TCPStore(host:port)", for messages.
  virtual const std::string& name() const = 0;
  // Sends one request and reads its answer. Network failures (and a missing
  // answer by the deadline) are DistNetworkError; after one, every later call
  // fails at once with the cause. A waiting request (GET, WAIT, MULTI_GET,
  // QUEUE_POP, WAIT_COUNTER) waits up to `arg` ms, then answers TIMEOUT.
  virtual Response call(Command c, std::span<const std::string* const> keys,
                        std::span<const std::string* const> values, int64_t arg, Deadline deadline) = 0;
};

// A client of torch's TCPStore server at host:port, connected (retrying until
// `timeout`) and validated as torch's client is.
std::unique_ptr<StoreClient> connect_torch_store(const std::string& host, uint16_t port, Millis timeout);

// "get(key 'k')", "wait(keys ['a', 'b'])": a request, for messages.
std::string describe_request(Command c, std::span<const std::string* const> keys);

// Refuses, before it is sent, a request above TCPStore's limits on keys per
// request and key bytes, or with a value above `max_value_bytes`
// (DistValueError; `value_limit` says whose limit: "the limit of N").
void check_request_size(const std::string& name, Command c, std::span<const std::string* const> keys,
                        std::span<const std::string* const> values, size_t max_value_bytes,
                        const std::string& value_limit);

}  // namespace tdist::store_detail
