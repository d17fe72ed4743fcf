// StoreConnectionPool, the connections both TCPStore clients (tdist's protocol
// and torch's) hold to their server: reuse, one more connection per
// concurrent request, at most a few kept, and after a network failure every
// later request failing at once with the first cause.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <functional>
#include <string>

#include "store/store_connection_pool.h"
#include "tdist/errors.h"

namespace {

using tdist::Deadline;
using tdist::DistNetworkError;
using tdist::DistStoreError;
using tdist::Fd;
using tdist::store_detail::Command;
using tdist::store_detail::Response;
using tdist::store_detail::StoreConnectionPool;

const std::string kName = "TCPStore(test:1)";
const std::string kKey = "k";
const std::string* const kKeys[] = {&kKey};

struct Counted {
  int opened = 0;
  std::function<void()> on_open;  // may throw
  StoreConnectionPool pool{[this](Deadline) {
                             ++opened;
                             if (on_open) on_open();
                             return Fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
                           },
                           "is the test server running?"};

  Response get(const std::function<void(int)>& exchange = {}) {
    return pool.call(kName, Command::kGet, kKeys, Deadline::after(std::chrono::seconds(5)), [&](int fd) {
      if (exchange) exchange(fd);
      Response r;
      r.num = fd;
      return r;
    });
  }
};

TEST(StoreConnectionPool, ARequestReusesAKeptConnection) {
  Counted c;
  const int first = static_cast<int>(c.get().num);
  EXPECT_EQ(c.opened, 1);
  EXPECT_EQ(c.get().num, first);
  EXPECT_EQ(c.opened, 1);
}

TEST(StoreConnectionPool, ARequestWhileAnotherHoldsTheConnectionOpensOneMoreAndBothAreKept) {
  Counted c;
  int inner = -1;
  const int outer = static_cast<int>(c.get([&](int) { inner = static_cast<int>(c.get().num); }).num);
  EXPECT_NE(inner, outer);
  EXPECT_EQ(c.opened, 2);
  c.get([&](int) { c.get(); });
  EXPECT_EQ(c.opened, 2);
}

TEST(StoreConnectionPool, AtMostEightConnectionsAreKept) {
  Counted c;
  std::function<void(int)> nest = [&](int depth) {
    if (depth > 0) c.get([&](int) { nest(depth - 1); });
  };
  nest(10);
  EXPECT_EQ(c.opened, 10);
  nest(10);
  EXPECT_EQ(c.opened, 12);  // eight were kept
}

TEST(StoreConnectionPool, AfterANetworkFailureEveryRequestFailsAtOnceWithTheFirstCause) {
  Counted c;
  c.get();
  try {
    c.get([](int) { throw DistNetworkError("closed by the peer"); });
    FAIL() << "no error";
  } catch (const DistNetworkError& e) {
    EXPECT_EQ(std::string(e.what()),
              "TCPStore(test:1): get(key 'k'): closed by the peer (is the test server running?)");
  }
  bool ran = false;
  try {
    c.get([&](int) { ran = true; });
    FAIL() << "no error";
  } catch (const DistNetworkError& e) {
    EXPECT_EQ(std::string(e.what()),
              "TCPStore(test:1): get(key 'k'): the connection to the server failed earlier (closed by the peer)");
  }
  EXPECT_FALSE(ran);
  EXPECT_EQ(c.opened, 1);
}

TEST(StoreConnectionPool, ARefusalToConnectIsNotANetworkFailure) {
  Counted c;
  c.on_open = [] { throw DistStoreError("the server refused this client"); };
  EXPECT_THROW(c.get(), DistStoreError);
  c.on_open = {};
  EXPECT_NO_THROW(c.get());  // the pool is not broken
  EXPECT_EQ(c.opened, 2);
}

}  // namespace
