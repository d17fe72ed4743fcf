// torch's TCPStore requests: parsing them (bounded, incremental) and the
// shared key space (torch_store_protocol.h).
#include "store/torch_store_protocol.h"

#include "store/tcp_store_protocol.h"
#include "tdist/store.h"

namespace tdist::store_detail {

namespace {

// The reserved prefix of torch keys without a leading "/" (torch's "init/").
const std::string kTorchRawPrefix = std::string("\0torch/", 7);

// Reads fields of one request from buf[pos, end); a field whose bytes have
// not all arrived makes it stop (complete() false), an announced size over a
// limit makes it fail (error set). Nothing is copied before it is all there.
class Cursor {
 public:
  Cursor(const std::string& buf, size_t pos) : buf_(buf), at_(pos) {}
  bool ok() const { return !short_ && error_.empty(); }
  bool short_of_bytes() const { return short_; }
  const std::string& error() const { return error_; }
  size_t at() const { return at_; }

  uint8_t u8() { return static_cast<uint8_t>(take(1) ? buf_[at_ - 1] : 0); }
  uint32_t u32() { return take(4) ? get_u32(buf_.data() + at_ - 4) : 0; }
  uint64_t u64() { return take(8) ? get_u64(buf_.data() + at_ - 8) : 0; }
  // A key (at most TCPStore::kMaxKeyBytes) or a payload (kMaxValueBytes, and
  // with the request's other payloads at most kMaxValueBytes).
  std::string bytes(bool key, const char* what) {
    uint64_t n = u64();
    if (!ok()) return {};
    const uint64_t limit = key ? TCPStore::kMaxKeyBytes : TCPStore::kMaxValueBytes;
    if (n > limit) return fail(std::string(what) + " of " + std::to_string(n) + " bytes, above the limit of " +
                               std::to_string(limit));
    if (!key) {
      payload_bytes_ += n;
      if (payload_bytes_ > TCPStore::kMaxValueBytes)
        return fail("payloads of " + std::to_string(payload_bytes_) + " bytes in one request, above the limit of " +
                    std::to_string(TCPStore::kMaxValueBytes));
    }
    if (!take(static_cast<size_t>(n))) return {};
    return buf_.substr(at_ - n, n);
  }
  uint64_t count(const char* what) {
    uint64_t n = u64();
    if (ok() && n > TCPStore::kMaxKeysPerRequest)
      fail(std::string(what) + " announces " + std::to_string(n) + " keys, above the limit of " +
           std::to_string(TCPStore::kMaxKeysPerRequest));
    return ok() ? n : 0;
  }
  std::string fail(std::string why) {
    if (error_.empty()) error_ = std::move(why);
    return {};
  }

 private:
  bool take(size_t n) {
    if (!ok()) return false;
    if (buf_.size() - at_ < n) {
      short_ = true;
      return false;
    }
    at_ += n;
    return true;
  }
  const std::string& buf_;
  size_t at_;
  bool short_ = false;
  std::string error_;
  uint64_t payload_bytes_ = 0;
};

}  // namespace

const char* torch_query_name(TorchQuery q) {
  static const char* const kNames[] = {"VALIDATE",   "SET",        "COMPARE_SET", "GET",       "ADD",
                                       "CHECK",      "WAIT",       "GETNUMKEYS",  "DELETE_KEY", "APPEND",
                                       "MULTI_GET",  "MULTI_SET",  "CANCEL_WAIT", "PING",      "QUEUE_PUSH",
                                       "QUEUE_POP",  "QUEUE_LEN",  "LIST_KEYS",   "BARRIER"};
  const auto i = static_cast<uint8_t>(q);
  return i <= kTorchLastQuery ? kNames[i] : "?";
}

void TorchRequestParser::append(const char* data, size_t n) {
  if (pos_ == buf_.size()) {
    buf_.clear();
    pos_ = 0;
  } else if (pos_ > (size_t{64} << 10) && pos_ > buf_.size() / 2) {
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  buf_.append(data, n);
}

TorchRequestParser::Result TorchRequestParser::next(TorchRequest* out) {
  if (!error_.empty()) return Result::kError;
  if (pos_ == buf_.size()) return Result::kNeedMore;
  Cursor in(buf_, pos_);
  TorchRequest r;
  const uint8_t q = in.u8();
  if (q > kTorchLastQuery) {
    error_ = "unknown query type " + std::to_string(q) + " (torch's protocol has 0 to " +
             std::to_string(kTorchLastQuery) + ")";
    return Result::kError;
  }
  r.query = static_cast<TorchQuery>(q);
  const char* name = torch_query_name(r.query);
  auto keys = [&](uint64_t n) {
    for (uint64_t i = 0; i < n && in.ok(); ++i) r.keys.push_back(in.bytes(true, "a key"));
  };
  switch (r.query) {
    case TorchQuery::kValidate:
    case TorchQuery::kPing:
      r.word = in.u32();
      break;
    case TorchQuery::kSet:
    case TorchQuery::kAppend:
    case TorchQuery::kQueuePush:
      keys(1);
      r.values.push_back(in.bytes(false, "a value"));
      break;
    case TorchQuery::kCompareSet:
      keys(1);
      r.values.push_back(in.bytes(false, "the expected value"));
      r.values.push_back(in.bytes(false, "the desired value"));
      break;
    case TorchQuery::kGet:
    case TorchQuery::kDeleteKey:
    case TorchQuery::kQueuePop:
    case TorchQuery::kQueueLen:
      keys(1);
      break;
    case TorchQuery::kAdd:
    case TorchQuery::kBarrier:
      keys(1);
      r.number = static_cast<int64_t>(in.u64());
      break;
    case TorchQuery::kCheck:
    case TorchQuery::kWait:
    case TorchQuery::kMultiGet:
      keys(in.count(name));
      break;
    case TorchQuery::kMultiSet: {
      const uint64_t n = in.count(name);
      for (uint64_t i = 0; i < n && in.ok(); ++i) {
        r.keys.push_back(in.bytes(true, "a key"));
        r.values.push_back(in.bytes(false, "a value"));
      }
      break;
    }
    case TorchQuery::kGetNumKeys:
    case TorchQuery::kCancelWait:
    case TorchQuery::kListKeys:
      break;
  }
  if (!in.error().empty()) {
    error_ = std::string(name) + ": " + in.error();
    return Result::kError;
  }
  if (in.short_of_bytes()) return Result::kNeedMore;
  pos_ = in.at();
  *out = std::move(r);
  return Result::kDone;
}

std::string torch_key_to_table(const std::string& wire) {
  if (!wire.empty() && wire[0] == '/') return wire.substr(1);
  return kTorchRawPrefix + wire;
}

bool table_key_to_torch(const std::string& key, std::string* wire) {
  if (key.compare(0, kTorchRawPrefix.size(), kTorchRawPrefix) == 0) {
    *wire = key.substr(kTorchRawPrefix.size());
    return true;
  }
  if (!key.empty() && key[0] == '\0') return false;  // tdist's own (kWorkersKey)
  *wire = "/" + key;
  return true;
}

void put_torch_string(std::string& out, const std::string& s) {
  put_u64(out, s.size());
  out += s;
}

void put_torch_i64(std::string& out, int64_t v) { put_u64(out, static_cast<uint64_t>(v)); }

void put_torch_u32(std::string& out, uint32_t v) { put_u32(out, v); }

}  // namespace tdist::store_detail
