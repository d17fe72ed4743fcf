// The "no job token" warning of a job started by hand (env://, no tdistrun):
// said once for the whole job, with what to do, not once per process.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/harness.h"
#include "tdist/tdist.h"
#include "util/socket.h"

namespace tdist::testing {
namespace {

int free_port() {
  Fd fd = listen_tcp("127.0.0.1", 0);
  return local_port(fd.get());
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

size_t count_of(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

TEST(JobTokenWarning, AJobStartedByHandSaysItOnceWithWhatToDo) {
  const std::string dir = temp_path("token-warning");
  std::filesystem::create_directories(dir);
  const int n = 4;
  const int port = free_port();
  auto results = run_in_processes(n, [&](int rank) {
    const int fd = ::open((dir + "/err" + std::to_string(rank)).c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || ::dup2(fd, 2) != 2) throw std::runtime_error("cannot redirect stderr");
    for (const char* v : {"TDIST_JOB_TOKEN", "TDIST_JOB_TOKEN_FILE", "TORCHELASTIC_USE_AGENT_STORE",
                          "TDIST_AGENT_STORE_PREFIX"})
      unsetenv(v);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
    setenv("RANK", std::to_string(rank).c_str(), 1);
    setenv("WORLD_SIZE", std::to_string(n).c_str(), 1);
    setenv("TDIST_LOG_LEVEL", "WARN", 1);
    setenv("TDIST_SHM", "0", 1);  // every pair over TCP: every rank authenticates its connections
    init_process_group();
    std::vector<int> v(3, 1);
    all_reduce(v);
    destroy_process_group();
  });
  ASSERT_EQ(describe_failures(results), "");
  std::string all;
  for (int r = 0; r < n; ++r) all += read_text(dir + "/err" + std::to_string(r));
  std::filesystem::remove_all(dir);
  EXPECT_EQ(count_of(all, "no job token is set"), 1u) << all;
  EXPECT_NE(all.find("TDIST_JOB_TOKEN"), std::string::npos) << all;  // and what to set
}

}  // namespace
}  // namespace tdist::testing
