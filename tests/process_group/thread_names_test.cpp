// The threads tdist starts carry names (util/thread_name.h): a group's
// progress and accept threads, its operation queue, the store server.
#include <gtest/gtest.h>

#include <dirent.h>

#include <fstream>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>

#include "process_group/process_util.h"
#include "tdist/distributed.h"
#include "util/thread_name.h"

namespace {

// The names of this process's threads (/proc/self/task/*/comm).
std::set<std::string> thread_names() {
  std::set<std::string> names;
  DIR* dir = opendir("/proc/self/task");
  if (!dir) return names;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream comm(std::string("/proc/self/task/") + e->d_name + "/comm");
    std::string name;
    std::getline(comm, name);
    names.insert(name);
  }
  closedir(dir);
  return names;
}

std::string joined(const std::set<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

TEST(ThreadNames, NameThisThreadCutsAtTheKernelsLimit) {
  std::string seen;
  std::thread([&] {
    tdist::name_this_thread("tdist-a-rather-long-name");
    std::ifstream comm("/proc/thread-self/comm");
    std::getline(comm, seen);
  }).join();
  EXPECT_EQ(seen, "tdist-a-rather-");
}

TEST(ThreadNames, AGroupsThreadsAreNamed) {
  tdist::testing::run_world(2, [](int) {
    float x = 1;
    tdist::all_reduce(tdist::Tensor(&x, 1), tdist::ReduceOp::SUM, nullptr, /*async_op=*/true)->wait();
    const auto names = thread_names();
    for (const char* want : {"tdist-progress", "tdist-accept", "tdist-ops"})
      if (!names.count(want)) throw std::runtime_error(std::string("no thread ") + want + " among " + joined(names));
    // Rank 0 serves the store of init_process_group.
    if (tdist::get_rank() == 0 && !names.count("tdist-store"))
      throw std::runtime_error("rank 0 has no tdist-store thread among " + joined(names));
  });
}

}  // namespace
