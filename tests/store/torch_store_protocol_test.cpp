// The parser of torch's TCPStore requests: every query type, bytes arriving
// in any pieces, and malformed or oversized frames rejected with a reason
// before their announced bytes are awaited; and the key space torch's
// clients share with tdist's.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "store/store_errors.h"
#include "store/tcp_store_protocol.h"
#include "store/torch_store_protocol.h"
#include "tdist/store.h"

namespace {

using namespace tdist::store_detail;
using tdist::testing::contains;
using Result = TorchRequestParser::Result;

std::string q(TorchQuery t) { return std::string(1, static_cast<char>(t)); }
std::string str(const std::string& s) {
  std::string out;
  put_torch_string(out, s);
  return out;
}
std::string u64(uint64_t v) {
  std::string out;
  put_u64(out, v);
  return out;
}
std::string u32(uint32_t v) {
  std::string out;
  put_u32(out, v);
  return out;
}

// Every query type as torch's client writes it.
std::vector<std::string> frames() {
  return {
      q(TorchQuery::kValidate) + u32(kTorchValidateMagic),
      q(TorchQuery::kPing) + u32(1234),
      q(TorchQuery::kSet) + str("/k") + str("value"),
      q(TorchQuery::kCompareSet) + str("/k") + str("") + str("new"),
      q(TorchQuery::kGet) + str("/k"),
      q(TorchQuery::kAdd) + str("init/") + u64(static_cast<uint64_t>(-3)),
      q(TorchQuery::kCheck) + u64(2) + str("/a") + str("/b"),
      q(TorchQuery::kWait) + u64(1) + str("/a"),
      q(TorchQuery::kGetNumKeys),
      q(TorchQuery::kDeleteKey) + str("/k"),
      q(TorchQuery::kAppend) + str("/k") + str("more"),
      q(TorchQuery::kMultiGet) + u64(2) + str("/a") + str("/b"),
      q(TorchQuery::kMultiSet) + u64(2) + str("/a") + str("1") + str("/b") + str("22"),
      q(TorchQuery::kCancelWait),
      q(TorchQuery::kQueuePush) + str("/q") + str("item"),
      q(TorchQuery::kQueuePop) + str("/q"),
      q(TorchQuery::kQueueLen) + str("/q"),
      q(TorchQuery::kListKeys),
      q(TorchQuery::kBarrier) + str("/bar") + u64(4),
  };
}

TEST(TorchStoreProtocol, EveryQueryTypeParsesWhateverPiecesItsBytesArriveIn) {
  std::string all;
  for (const auto& f : frames()) all += f;
  for (size_t piece : {size_t{1}, size_t{3}, size_t{7}, all.size()}) {
    TorchRequestParser p;
    std::vector<TorchRequest> got;
    for (size_t at = 0; at < all.size(); at += piece) {
      p.append(all.data() + at, std::min(piece, all.size() - at));
      TorchRequest r;
      Result res;
      while ((res = p.next(&r)) == Result::kDone) got.push_back(r);
      ASSERT_EQ(res, Result::kNeedMore) << p.error();
    }
    ASSERT_EQ(got.size(), frames().size()) << "pieces of " << piece;
    EXPECT_EQ(p.buffered(), 0u);
    EXPECT_EQ(got[0].word, kTorchValidateMagic);
    EXPECT_EQ(got[1].word, 1234u);
    EXPECT_EQ(got[2].keys, std::vector<std::string>{"/k"});
    EXPECT_EQ(got[2].values, std::vector<std::string>{"value"});
    EXPECT_EQ(got[3].values, (std::vector<std::string>{"", "new"}));
    EXPECT_EQ(got[5].number, -3);
    EXPECT_EQ(got[6].keys, (std::vector<std::string>{"/a", "/b"}));
    EXPECT_EQ(got[12].keys, (std::vector<std::string>{"/a", "/b"}));
    EXPECT_EQ(got[12].values, (std::vector<std::string>{"1", "22"}));
    EXPECT_EQ(got[18].query, TorchQuery::kBarrier);
    EXPECT_EQ(got[18].number, 4);
  }
}

std::string error_of(const std::string& bytes) {
  TorchRequestParser p;
  p.append(bytes.data(), bytes.size());
  TorchRequest r;
  EXPECT_EQ(p.next(&r), Result::kError) << "no error for a frame of " << bytes.size() << " bytes";
  return p.error();
}

TEST(TorchStoreProtocol, MalformedAndOversizedFramesAreRejectedBeforeTheirBytesAreAwaited) {
  EXPECT_TRUE(contains(error_of(std::string(1, '\x63')), "unknown query type 99")) << error_of("\x63");
  // A key longer than tdist's limit, announced only: rejected at its length.
  const std::string long_key = error_of(q(TorchQuery::kGet) + u64(tdist::TCPStore::kMaxKeyBytes + 1));
  EXPECT_TRUE(contains(long_key, "GET: a key of 4097 bytes, above the limit of 4096")) << long_key;
  const std::string huge = error_of(q(TorchQuery::kSet) + str("/k") + u64(uint64_t{1} << 62));
  EXPECT_TRUE(contains(huge, "SET: a value of")) << huge;
  const std::string many = error_of(q(TorchQuery::kWait) + u64(uint64_t{1} << 40));
  EXPECT_TRUE(contains(many, "WAIT announces 1099511627776 keys")) << many;
  // A truncated frame is only a frame still arriving; after an error, no more requests.
  TorchRequestParser p;
  const std::string set = q(TorchQuery::kSet) + str("/k") + str("value");
  p.append(set.data(), set.size() - 1);
  TorchRequest r;
  EXPECT_EQ(p.next(&r), Result::kNeedMore);
  EXPECT_EQ(p.buffered(), set.size() - 1);
}

TEST(TorchStoreProtocol, TorchsKeysMapOntoTdistsAndBack) {
  EXPECT_EQ(torch_key_to_table("/k"), "k");
  EXPECT_EQ(torch_key_to_table("//worker/attempt_0/k"), "/worker/attempt_0/k");
  const std::string init = torch_key_to_table("init/");
  EXPECT_EQ(init[0], '\0');  // apart from every readable key
  std::string wire;
  ASSERT_TRUE(table_key_to_torch("k", &wire));
  EXPECT_EQ(wire, "/k");
  ASSERT_TRUE(table_key_to_torch(init, &wire));
  EXPECT_EQ(wire, "init/");
  EXPECT_FALSE(table_key_to_torch(kWorkersKey, &wire));  // tdist's own
}

}  // namespace
