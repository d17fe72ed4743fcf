// Listeners bind the address the job uses (util/bind_address.h), not every
// interface; the store's listener is checked in the kernel's socket table.
#include "util/bind_address.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "common/scoped_env.h"
#include "tdist/store.h"

namespace tdist {
namespace {

using testing::ScopedEnv;

TEST(BindAddress, LoopbackJobsBindLoopbackAndBindAllRestoresEveryInterface) {
  ::unsetenv("TDIST_BIND_ALL");
  EXPECT_EQ(bind_address_for("127.0.0.1"), "127.0.0.1");
  EXPECT_EQ(bind_address_for("localhost"), "127.0.0.1");
  EXPECT_EQ(bind_address_for("192.0.2.1"), "");  // TEST-NET-1: not ours, so every interface
  EXPECT_EQ(local_address_towards("127.0.0.1"), "127.0.0.1");
  ScopedEnv all("TDIST_BIND_ALL", "1");
  EXPECT_EQ(bind_address_for("127.0.0.1"), "");
}

// The local address (hex, as /proc/net/tcp writes it) of the listener on `port`.
std::string listening_address(uint16_t port) {
  std::ifstream in("/proc/net/tcp");
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line)) {
    std::istringstream ss(line);
    std::string slot, local, remote, state;
    ss >> slot >> local >> remote >> state;
    if (state != "0A") continue;  // LISTEN
    auto colon = local.find(':');
    if (std::stoul(local.substr(colon + 1), nullptr, 16) == port) return local.substr(0, colon);
  }
  return "";
}

TEST(BindAddress, AStoreForALoopbackMasterListensOnLoopbackOnly) {
  ::unsetenv("TDIST_BIND_ALL");
  TCPStore store("127.0.0.1", 0, TCPStoreOptions{.is_master = true, .wait_for_workers = false});
  EXPECT_EQ(listening_address(store.port()), "0100007F");  // 127.0.0.1, not 0.0.0.0
}

}  // namespace
}  // namespace tdist
