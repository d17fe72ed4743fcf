// The TCPStore server's incremental request parser, byte by byte.
#include <gtest/gtest.h>

#include <string>

#include "store/tcp_store_protocol.h"

namespace sd = tdist::store_detail;
using Result = sd::RequestParser::Result;

namespace {

std::string set_request(const std::string& key, const std::string& value) {
  std::string b;
  sd::encode_request_head(b, sd::Command::kSet, 1, 1, 0);
  sd::encode_key(b, key);
  sd::put_u64(b, value.size());
  return b + value;
}

TEST(RequestParser, ParsesOneByteAtATime) {
  std::string bytes = set_request("key", std::string("v\0lue", 5));
  sd::RequestParser p;
  for (size_t i = 0; i < bytes.size(); ++i) {
    size_t used = 0;
    Result r = p.feed(bytes.data() + i, 1, &used);
    EXPECT_EQ(used, 1u);
    if (i + 1 < bytes.size()) {
      ASSERT_EQ(r, Result::kNeedMore) << "at byte " << i;
      EXPECT_TRUE(p.in_progress());
    } else {
      ASSERT_EQ(r, Result::kDone);
    }
  }
  sd::Request req = p.take();
  EXPECT_EQ(req.command, sd::Command::kSet);
  EXPECT_EQ(req.keys, std::vector<std::string>{"key"});
  EXPECT_EQ(req.values, std::vector<std::string>{std::string("v\0lue", 5)});
  EXPECT_FALSE(p.in_progress());
}

TEST(RequestParser, StopsAtTheEndOfEachRequest) {
  std::string bytes = set_request("a", "1") + set_request("", "") + set_request("c", "3");
  sd::RequestParser p;
  size_t pos = 0;
  std::vector<std::string> keys;
  while (pos < bytes.size()) {
    size_t used = 0;
    ASSERT_EQ(p.feed(bytes.data() + pos, bytes.size() - pos, &used), Result::kDone);
    pos += used;
    keys.push_back(p.take().keys.at(0));
  }
  EXPECT_EQ(keys, (std::vector<std::string>{"a", "", "c"}));
}

TEST(RequestParser, RequestWithoutItems) {
  std::string b;
  sd::encode_request_head(b, sd::Command::kNumKeys, 0, 0, 0);
  sd::RequestParser p;
  size_t used = 0;
  EXPECT_EQ(p.feed(b.data(), b.size(), &used), Result::kDone);
  EXPECT_EQ(used, b.size());
  EXPECT_EQ(p.take().command, sd::Command::kNumKeys);
}

TEST(RequestParser, RejectsWhatIsNotARequest) {
  auto fails = [](const std::string& bytes) {
    sd::RequestParser p;
    size_t used = 0;
    return p.feed(bytes.data(), bytes.size(), &used) == Result::kError;
  };
  std::string unknown(sd::kRequestHeaderBytes, '\0');
  unknown[0] = static_cast<char>(99);
  EXPECT_TRUE(fails(unknown));
  std::string shape;
  sd::encode_request_head(shape, sd::Command::kGet, 2, 0, 0);
  EXPECT_TRUE(fails(shape));
  std::string many;
  sd::encode_request_head(many, sd::Command::kCheck, tdist::TCPStore::kMaxKeysPerRequest + 1, 0, 0);
  EXPECT_TRUE(fails(many));
  std::string key;
  sd::encode_request_head(key, sd::Command::kDelete, 1, 0, 0);
  sd::put_u32(key, tdist::TCPStore::kMaxKeyBytes + 1);
  EXPECT_TRUE(fails(key));
  std::string value;
  sd::encode_request_head(value, sd::Command::kSet, 1, 1, 0);
  sd::encode_key(value, "k");
  sd::put_u64(value, tdist::TCPStore::kMaxValueBytes + 1);
  EXPECT_TRUE(fails(value));
}

TEST(RequestParser, DirectReceiveIntoALargeValue) {
  std::string head;
  sd::encode_request_head(head, sd::Command::kSet, 1, 1, 0);
  sd::encode_key(head, "k");
  sd::put_u64(head, 100000);
  sd::RequestParser p;
  size_t used = 0;
  ASSERT_EQ(p.feed(head.data(), head.size(), &used), Result::kNeedMore);
  size_t remaining = 0;
  std::string* v = p.value_in_progress(&remaining);
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(remaining, 100000u);
  v->append(60000, 'x');
  EXPECT_EQ(p.committed(60000), Result::kNeedMore);
  std::string rest(40000, 'y');
  ASSERT_EQ(p.feed(rest.data(), rest.size(), &used), Result::kDone);
  sd::Request r = p.take();
  EXPECT_EQ(r.values.at(0).size(), 100000u);
  EXPECT_EQ(r.values[0].substr(59999, 2), "xy");
}

}  // namespace
