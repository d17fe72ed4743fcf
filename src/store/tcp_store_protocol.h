// The TCPStore wire protocol (client <-> server), and its incremental parser.
//
// Every integer is little-endian. One request at a time per connection: the
// client sends a request and reads its response before sending the next.
//
//   Request  := u8 command | u32 nkeys | u32 nvalues | i64 arg
//               | nkeys   x (u32 key_len   | key bytes)
//               | nvalues x (u64 value_len | value bytes)
//   Response := u8 status | i64 num | u32 nvalues
//               | nvalues x (u64 value_len | value bytes)
//
//   command       nkeys   nvalues        arg          response (status OK)
//   HELLO     1   0       1 (nonce)      kMagic       num = kVersion, values = [server nonce, "token"|"open",
//                                                     server proof]
//   SET       2   1       1 (value)      0            -
//   GET       3   1       0              timeout ms   values = [value]
//   ADD       4   1       0              amount       num = new count
//   APPEND    5   1       1 (suffix)     0            -
//   CMP_SET   6   1       2 (exp, des)   0            values = [value afterwards]
//   CHECK     7   0..max  0              0            num = 1 if all exist
//   WAIT      8   0..max  0              timeout ms   -
//   DELETE    9   1       0              0            num = 1 if it existed
//   NUM_KEYS 10   0       0              0            num = number of user keys
//   MULTI_GET 11  0..max  0              timeout ms   values = the keys' values
//   MULTI_SET 12  n       n              0            -
//   WAIT_COUNTER 13 1     1 (u64 target) timeout ms   num = the counter's value
//   AUTH      14  0       1 (proof)      0            -  (ERROR and the connection closed: wrong proof)
//   QUEUE_PUSH 15 1 (queue) 1 (value)    0            -
//   QUEUE_POP 16  1 (queue) 0            timeout ms   values = [the oldest value], removed from the queue
//                                        (-1: do not wait; TIMEOUT at once when the queue is empty)
//   QUEUE_LEN 17  1 (queue) 0            0            num = number of values in the queue
//   LIST_KEYS 18  0       0              0            values = the user keys (ERROR when more than
//                                                     kMaxKeysPerRequest or the answer limit)
//
// Status: OK 0; TIMEOUT 1 (a waiting command's timeout expired on the server:
// values = the keys still missing, num = the counter for WAIT_COUNTER);
// ERROR 2 (values = [message], e.g. add on a key that is not a counter).
//
// The job token (util/job_token.h): a server that has one answers HELLO with
// "token" and its proof HMAC(token, "tdist-store-server", client nonce, server
// nonce), and serves nothing but AUTH until the client sent its proof
// HMAC(token, "tdist-store-client", client nonce, server nonce). The token never
// crosses the wire. Without a token the server answers "open" and serves at once.
//
// The first request of a connection must be HELLO with kMagic. The server
// drops a connection (and only it) that sends anything else first, an unknown
// command, a shape that does not fit the command, or counts/lengths above
// TCPStore::kMaxKeysPerRequest / kMaxKeyBytes / kMaxValueBytes; it buffers
// only bytes that actually arrive, never an announced size up front.
// GET/WAIT/MULTI_GET/WAIT_COUNTER on missing keys are parked on the server and
// answered when the keys appear, or with TIMEOUT when `arg` ms have passed.
// Queues are apart from the keys; a QUEUE_POP on an empty queue is parked
// likewise, and a QUEUE_PUSH hands its value to the longest-parked pop.
//
// kWorkersKey (it starts with a NUL byte, so it cannot clash with a readable
// key) counts the store users for wait_for_workers; NUM_KEYS and LIST_KEYS leave it out.
// kWaitedKey is torch's "init/" key: set by every instance made with a world_size
// and wait_for_workers (where torch's adds to "init/"), so that NUM_KEYS counts it
// as torch's count does; LIST_KEYS leaves it out, as torch's list does.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "store/torch_store_protocol.h"
#include "tdist/store.h"

namespace tdist::store_detail {

inline constexpr int64_t kMagic = 0x3153'5453'4944'5400;  // "\0TDISTS1" read as little-endian bytes
inline constexpr int64_t kVersion = 2;
inline const std::string kWorkersKey = std::string("\0tdist/store_users", 18);
inline const std::string kWaitedKey = std::string("\0tdist/init", 11);

enum class Command : uint8_t {
  kHello = 1,
  kSet = 2,
  kGet = 3,
  kAdd = 4,
  kAppend = 5,
  kCompareSet = 6,
  kCheck = 7,
  kWait = 8,
  kDelete = 9,
  kNumKeys = 10,
  kMultiGet = 11,
  kMultiSet = 12,
  kWaitCounter = 13,
  kAuth = 14,
  kQueuePush = 15,
  kQueuePop = 16,
  kQueueLen = 17,
  kListKeys = 18,
};

enum class Status : uint8_t { kOk = 0, kTimeout = 1, kError = 2 };

inline constexpr size_t kRequestHeaderBytes = 1 + 4 + 4 + 8;
inline constexpr size_t kResponseHeaderBytes = 1 + 8 + 4;

const char* command_name(Command c);

struct Request {
  Command command = Command::kHello;
  int64_t arg = 0;
  std::vector<std::string> keys;
  std::vector<std::string> values;
};

struct Response {
  Status status = Status::kOk;
  int64_t num = 0;
  std::vector<std::string> values;
};

// Little-endian encoding.
inline void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
inline void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
inline uint32_t get_u32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}
inline uint64_t get_u64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

// Appends the request header and keys; values are appended by the caller
// (put_u64(len) + bytes) so that large ones can be sent without a copy.
void encode_request_head(std::string& out, Command c, size_t nkeys, size_t nvalues, int64_t arg);
void encode_key(std::string& out, const std::string& key);
std::string encode_response(const Response& r);

// Whether (command, nkeys, nvalues) is a valid request shape; else why not.
bool check_shape(uint8_t command, uint64_t nkeys, uint64_t nvalues, std::string* why);

// torch.distributed's TCPStore client (torch_store_protocol.h) is told apart
// from tdist's by its first bytes: torch 2.x opens with VALIDATE (query type
// 0, then the u32 magic 0x3C85F7CE), which the server then serves; torch 1.x
// with its first request in an older protocol (no VALIDATE), a query type
// 0..11 then the u64 length of a key (or a count of keys), small and never
// zero, which it does not. tdist's HELLO has 2^32 there (nkeys 0, nvalues 1).
enum class FirstBytes { kTorch2Client, kTorch1Client, kOther, kNeedMore };
inline constexpr size_t kTorchProbeBytes = 1 + 8;  // what classify_first_bytes needs at most
// What the first bytes of a connection (`head`, up to kTorchProbeBytes) say about its client.
FirstBytes classify_first_bytes(const std::string& head);

// Incremental request parser: feed it whatever bytes arrived; it reports a
// complete request, a need for more bytes, or a protocol violation.
class RequestParser {
 public:
  enum class Result { kNeedMore, kDone, kError };

  // Consumes bytes from data[0, n) up to the end of one request; *consumed
  // says how many. kDone: take() the request (the rest of the bytes belong
  // to the next one). kError: error() says why; the connection must go.
  Result feed(const char* data, size_t n, size_t* consumed);
  Request take();
  const std::string& error() const { return error_; }
  // True when part of a request has arrived but not all of it.
  bool in_progress() const { return state_ != State::kHeader || have_ != 0; }

  // For large values: when the parser is in the middle of a value, the value
  // string and how many bytes it still lacks; the caller may receive directly
  // into it (append) and then call committed() with the new byte count.
  std::string* value_in_progress(size_t* remaining);
  Result committed(size_t n);

 private:
  enum class State { kHeader, kKeyLen, kKey, kValueLen, kValue, kDone };
  Result next_item();  // moves to the next length field, or kDone
  Result fail(std::string why) {
    error_ = std::move(why);
    return Result::kError;
  }

  State state_ = State::kHeader;
  char scratch_[kRequestHeaderBytes] = {};
  size_t have_ = 0;  // bytes in scratch_
  uint32_t nkeys_ = 0, nvalues_ = 0;
  size_t item_ = 0;       // index of the key or value being read
  uint64_t remaining_ = 0;  // bytes left of the current key/value
  Request req_;
  std::string error_;
};

}  // namespace tdist::store_detail
