// A worker for tdistrun's --on-failure tests: one rank fails, the others
// learn it from the launcher's store, without init_process_group.
//
//   exit_watch_worker DIR FAIL_RANK CODE
//
// FAIL_RANK exits CODE after 100 ms (CODE "kill": SIGKILL); FAIL_RANK "all":
// every rank does. The others wait (up to 30 s) for exited/<FAIL_RANK> in the
// store tdistrun gives its workers (MASTER_ADDR:MASTER_PORT, under
// TDIST_AGENT_STORE_PREFIX), write its value to DIR/seen<RANK> and exit 0;
// they exit 4 if it does not come.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>

#include <tdist/errors.h>
#include <tdist/store.h>

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: exit_watch_worker DIR FAIL_RANK CODE\n");
    return 99;
  }
  const std::string dir = argv[1], fail = argv[2], code = argv[3];
  const char* rank_env = std::getenv("RANK");
  const std::string rank = rank_env != nullptr ? rank_env : "unset";
  if (fail == "all" || fail == rank) {
    usleep(100 * 1000);
    if (code == "kill") raise(SIGKILL);
    return std::atoi(code.c_str());
  }
  try {
    tdist::TCPStoreOptions o;
    o.is_master = false;
    o.wait_for_workers = false;
    o.timeout = std::chrono::seconds(30);
    const char* prefix = std::getenv("TDIST_AGENT_STORE_PREFIX");
    auto store = std::make_shared<tdist::PrefixStore>(
        prefix != nullptr ? prefix : "",
        std::make_shared<tdist::TCPStore>(std::getenv("MASTER_ADDR"),
                                          static_cast<uint16_t>(std::atoi(std::getenv("MASTER_PORT"))), o));
    const std::string key = "exited/" + fail;
    store->wait({key}, std::chrono::seconds(30));
    std::ofstream(dir + "/seen" + rank) << store->get(key) << "\n";
  } catch (const tdist::DistError& e) {
    std::fprintf(stderr, "rank %s: %s\n", rank.c_str(), e.what());
    return 4;
  }
  return 0;
}
