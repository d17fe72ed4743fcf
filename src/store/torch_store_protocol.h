// torch.distributed's TCPStore wire protocol (torch 2.x, the libuv server's
// and the client's of torch/csrc/distributed/c10d), which tdist's server
// speaks next to its own (tcp_store_protocol.h) and tdist's client speaks to
// a torch server (torchrun's agent store).
//
// Every integer is little-endian (the hosts' order; torch copies raw bytes).
// A request is a query byte and its fields; there is no length of the whole
// request and no status in an answer. A string or payload is a u64 length and
// its bytes.
//
//   query         fields                       answer
//   VALIDATE  0   u32 0x3C85F7CE               -   (first, once; then PING)
//   SET       1   key, payload                 -
//   COMPARE_SET 2 key, expected, desired       payload: the value afterwards
//   GET       3   key                          payload ("" for a missing key)
//   ADD       4   key, i64                     i64: the new count (decimal text in the store)
//   CHECK     5   u64 n, n keys                u8: READY 0 / NOT_READY 1
//   WAIT      6   u64 n, n keys                u8 STOP_WAITING 0, when all exist (no timeout)
//   GETNUMKEYS 7  -                            i64
//   DELETE_KEY 8  key                          i64: 1 if it existed
//   APPEND    9   key, payload                 -
//   MULTI_GET 10  u64 n, n keys                n payloads ("" for a missing key)
//   MULTI_SET 11  u64 n, n x (key, payload)    -
//   CANCEL_WAIT 12 -                           u8 WAIT_CANCELED 1 (the parked WAIT is dropped)
//   PING     13   u32 nonce                    u32: the nonce
//   QUEUE_PUSH 14 key, payload                 -
//   QUEUE_POP 15  key                          i64 length before the pop, then the payload if > 0
//   QUEUE_LEN 16  key                          i64
//   LIST_KEYS 17  -                            i64 n, n strings
//   BARRIER  18   key, i64 world size          u8 STOP_WAITING 0, once the key's count reaches it
//
// torch's client waits for a key with WAIT and then GETs it; after its own
// timeout it sends CANCEL_WAIT and reads STOP_WAITING (if it crossed) and
// WAIT_CANCELED. It writes user keys with a "/" in front; its workers'
// counter "init/" has none.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tdist::store_detail {

inline constexpr uint32_t kTorchValidateMagic = 0x3C85F7CE;

enum class TorchQuery : uint8_t {
  kValidate = 0,
  kSet = 1,
  kCompareSet = 2,
  kGet = 3,
  kAdd = 4,
  kCheck = 5,
  kWait = 6,
  kGetNumKeys = 7,
  kDeleteKey = 8,
  kAppend = 9,
  kMultiGet = 10,
  kMultiSet = 11,
  kCancelWait = 12,
  kPing = 13,
  kQueuePush = 14,
  kQueuePop = 15,
  kQueueLen = 16,
  kListKeys = 17,
  kBarrier = 18,
};
inline constexpr uint8_t kTorchLastQuery = static_cast<uint8_t>(TorchQuery::kBarrier);
inline constexpr uint8_t kTorchReady = 0, kTorchNotReady = 1;              // CHECK
inline constexpr uint8_t kTorchStopWaiting = 0, kTorchWaitCanceled = 1;  // WAIT, BARRIER, CANCEL_WAIT

const char* torch_query_name(TorchQuery q);

struct TorchRequest {
  TorchQuery query = TorchQuery::kValidate;
  std::vector<std::string> keys;    // as on the wire (torch_key_to_table maps them)
  std::vector<std::string> values;  // payloads, in order (MULTI_SET: one per key)
  int64_t number = 0;               // ADD's amount, BARRIER's world size
  uint32_t word = 0;                // VALIDATE's magic, PING's nonce
};

// Incremental parser of torch's requests: append() whatever arrived, then
// next() until it says kNeedMore. Announced lengths and counts are checked
// before their bytes are awaited (keys up to TCPStore::kMaxKeyBytes, payloads
// up to kMaxValueBytes, counts up to kMaxKeysPerRequest, the payloads of one
// request together up to kMaxValueBytes), so a request is never buffered
// beyond those; bytes of a request are kept only as they arrive.
class TorchRequestParser {
 public:
  enum class Result { kNeedMore, kDone, kError };
  void append(const char* data, size_t n);
  Result next(TorchRequest* out);
  const std::string& error() const { return error_; }
  // Bytes received and not yet taken as a request.
  size_t buffered() const { return buf_.size() - pos_; }

 private:
  std::string buf_;
  size_t pos_ = 0;
  std::string error_;
};

// The key space torch's clients share with tdist's: torch's "/k" is tdist's
// "k"; a key without the "/" (torch's "init/") lives apart, under a prefix
// that starts with a NUL byte, so no readable key clashes with it.
std::string torch_key_to_table(const std::string& wire);
// The wire form of a table key for LIST_KEYS; false for tdist's own reserved keys.
bool table_key_to_torch(const std::string& key, std::string* wire);

// Encoding (answers and, for tdist's client, requests).
void put_torch_string(std::string& out, const std::string& s);
void put_torch_i64(std::string& out, int64_t v);
void put_torch_u32(std::string& out, uint32_t v);

}  // namespace tdist::store_detail
