#include "store/tcp_store_protocol.h"

#include <algorithm>

namespace tdist::store_detail {

const char* command_name(Command c) {
  switch (c) {
    case Command::kHello: return "hello";
    case Command::kSet: return "set";
    case Command::kGet: return "get";
    case Command::kAdd: return "add";
    case Command::kAppend: return "append";
    case Command::kCompareSet: return "compare_set";
    case Command::kCheck: return "check";
    case Command::kWait: return "wait";
    case Command::kDelete: return "delete_key";
    case Command::kNumKeys: return "num_keys";
    case Command::kMultiGet: return "multi_get";
    case Command::kMultiSet: return "multi_set";
    case Command::kWaitCounter: return "wait_counter";
    case Command::kAuth: return "auth";
    case Command::kQueuePush: return "queue_push";
    case Command::kQueuePop: return "queue_pop";
    case Command::kQueueLen: return "queue_len";
    case Command::kListKeys: return "list_keys";
  }
  return "?";
}

void encode_request_head(std::string& out, Command c, size_t nkeys, size_t nvalues, int64_t arg) {
  out.push_back(static_cast<char>(c));
  put_u32(out, static_cast<uint32_t>(nkeys));
  put_u32(out, static_cast<uint32_t>(nvalues));
  put_u64(out, static_cast<uint64_t>(arg));
}

void encode_key(std::string& out, const std::string& key) {
  put_u32(out, static_cast<uint32_t>(key.size()));
  out += key;
}

std::string encode_response(const Response& r) {
  size_t total = kResponseHeaderBytes;
  for (const auto& v : r.values) total += 8 + v.size();
  std::string out;
  out.reserve(total);
  out.push_back(static_cast<char>(r.status));
  put_u64(out, static_cast<uint64_t>(r.num));
  put_u32(out, static_cast<uint32_t>(r.values.size()));
  for (const auto& v : r.values) {
    put_u64(out, v.size());
    out += v;
  }
  return out;
}

FirstBytes classify_first_bytes(const std::string& head) {
  constexpr uint8_t kTorchValidate = 0;
  constexpr uint8_t kTorch1LastQuery = 11;  // torch 1.x: SET .. MULTI_SET
  if (head.size() >= 5 && static_cast<uint8_t>(head[0]) == kTorchValidate &&
      get_u32(head.data() + 1) == kTorchValidateMagic)
    return FirstBytes::kTorch2Client;
  if (head.size() < kTorchProbeBytes) return FirstBytes::kNeedMore;
  const uint64_t length = get_u64(head.data() + 1);
  if (static_cast<uint8_t>(head[0]) <= kTorch1LastQuery && length >= 1 && length <= TCPStore::kMaxKeyBytes)
    return FirstBytes::kTorch1Client;
  return FirstBytes::kOther;
}

bool check_shape(uint8_t command, uint64_t nkeys, uint64_t nvalues, std::string* why) {
  auto expect = [&](uint64_t k, uint64_t v) {
    if (nkeys == k && nvalues == v) return true;
    *why = std::string("command ") + command_name(static_cast<Command>(command)) + " with " +
           std::to_string(nkeys) + " keys and " + std::to_string(nvalues) + " values (expected " +
           std::to_string(k) + " and " + std::to_string(v) + ")";
    return false;
  };
  if (command < static_cast<uint8_t>(Command::kHello) || command > static_cast<uint8_t>(Command::kListKeys)) {
    *why = "unknown command byte " + std::to_string(command);
    return false;
  }
  if (nkeys > TCPStore::kMaxKeysPerRequest || nvalues > TCPStore::kMaxKeysPerRequest) {
    *why = "request announces " + std::to_string(nkeys) + " keys and " + std::to_string(nvalues) +
           " values, above the limit of " + std::to_string(TCPStore::kMaxKeysPerRequest);
    return false;
  }
  switch (static_cast<Command>(command)) {
    case Command::kHello:
    case Command::kAuth: return expect(0, 1);
    case Command::kNumKeys:
    case Command::kListKeys: return expect(0, 0);
    case Command::kSet:
    case Command::kAppend:
    case Command::kWaitCounter:
    case Command::kQueuePush: return expect(1, 1);
    case Command::kQueuePop:
    case Command::kQueueLen:
    case Command::kGet:
    case Command::kAdd:
    case Command::kDelete: return expect(1, 0);
    case Command::kCompareSet: return expect(1, 2);
    case Command::kCheck:
    case Command::kWait:
    case Command::kMultiGet: return expect(nkeys, 0);
    case Command::kMultiSet: return expect(nkeys, nkeys);
  }
  *why = "unknown command byte " + std::to_string(command);
  return false;
}

RequestParser::Result RequestParser::next_item() {
  // After the header or a finished key/value: the next length field, or done.
  if (item_ < nkeys_) {
    state_ = State::kKeyLen;
  } else if (item_ < size_t{nkeys_} + nvalues_) {
    state_ = State::kValueLen;
  } else {
    state_ = State::kDone;
    return Result::kDone;
  }
  have_ = 0;
  return Result::kNeedMore;
}

RequestParser::Result RequestParser::feed(const char* data, size_t n, size_t* consumed) {
  size_t pos = 0;
  Result result = Result::kNeedMore;
  auto fill = [&](size_t want) {  // gathers a fixed-size field into scratch_
    size_t take = std::min(want - have_, n - pos);
    std::memcpy(scratch_ + have_, data + pos, take);
    have_ += take;
    pos += take;
    return have_ == want;
  };
  while (result == Result::kNeedMore && (pos < n || state_ == State::kDone)) {
    switch (state_) {
      case State::kDone:
        result = Result::kDone;
        break;
      case State::kHeader: {
        if (!fill(kRequestHeaderBytes)) break;
        uint8_t cmd = static_cast<uint8_t>(scratch_[0]);
        nkeys_ = get_u32(scratch_ + 1);
        nvalues_ = get_u32(scratch_ + 5);
        std::string why;
        if (!check_shape(cmd, nkeys_, nvalues_, &why)) {
          result = fail(why);
          break;
        }
        req_ = Request{};
        req_.command = static_cast<Command>(cmd);
        req_.arg = static_cast<int64_t>(get_u64(scratch_ + 9));
        req_.keys.reserve(nkeys_);
        req_.values.reserve(nvalues_);
        item_ = 0;
        result = next_item();
        break;
      }
      case State::kKeyLen: {
        if (!fill(4)) break;
        remaining_ = get_u32(scratch_);
        if (remaining_ > TCPStore::kMaxKeyBytes) {
          result = fail("key of " + std::to_string(remaining_) + " bytes announced, above the limit of " +
                        std::to_string(TCPStore::kMaxKeyBytes));
          break;
        }
        req_.keys.emplace_back();
        state_ = State::kKey;
        if (remaining_ == 0) {
          ++item_;
          result = next_item();
        }
        break;
      }
      case State::kValueLen: {
        if (!fill(8)) break;
        remaining_ = get_u64(scratch_);
        if (remaining_ > TCPStore::kMaxValueBytes) {
          result = fail("value of " + std::to_string(remaining_) + " bytes announced, above the limit of " +
                        std::to_string(TCPStore::kMaxValueBytes));
          break;
        }
        req_.values.emplace_back();
        state_ = State::kValue;
        if (remaining_ == 0) {
          ++item_;
          result = next_item();
        }
        break;
      }
      case State::kKey:
      case State::kValue: {
        std::string& dst = state_ == State::kKey ? req_.keys.back() : req_.values.back();
        size_t take = static_cast<size_t>(std::min<uint64_t>(remaining_, n - pos));
        dst.append(data + pos, take);
        pos += take;
        remaining_ -= take;
        if (remaining_ == 0) {
          ++item_;
          result = next_item();
        }
        break;
      }
    }
  }
  *consumed = pos;
  return result;
}

std::string* RequestParser::value_in_progress(size_t* remaining) {
  if (state_ != State::kValue || remaining_ == 0) return nullptr;
  *remaining = static_cast<size_t>(remaining_);
  return &req_.values.back();
}

RequestParser::Result RequestParser::committed(size_t n) {
  remaining_ -= std::min<uint64_t>(n, remaining_);
  if (remaining_ != 0) return Result::kNeedMore;
  ++item_;
  return next_item();
}

Request RequestParser::take() {
  Request r = std::move(req_);
  req_ = Request{};
  state_ = State::kHeader;
  have_ = 0;
  return r;
}

}  // namespace tdist::store_detail
