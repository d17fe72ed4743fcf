// Segments whose creator died before unlinking them are removed by the next
// job on the host; a live process's segment is kept.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "util/shm_segment.h"

namespace tdist {
namespace {

bool in_dev_shm(const std::string& name) { return ::access(("/dev/shm" + name).c_str(), F_OK) == 0; }

TEST(ShmCleanup, SegmentsOfDeadCreatorsAreRemovedAndLiveOnesKept) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Dies as kill -9 would leave it: the name created, never unlinked.
    ShmSegment seg = ShmSegment::create("cleanuptest", 4096);
    std::string name = seg.name();
    if (::write(fds[1], name.data(), name.size()) != static_cast<ssize_t>(name.size())) _exit(2);
    _exit(0);
  }
  ::close(fds[1]);
  char buf[256] = {0};
  ssize_t n = ::read(fds[0], buf, sizeof(buf) - 1);
  ::close(fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_GT(n, 0);
  const std::string dead(buf, static_cast<size_t>(n));
  ASSERT_TRUE(in_dev_shm(dead)) << dead;

  // This process's first segment sweeps the leftovers; it stays, being alive.
  ShmSegment live = ShmSegment::create("cleanuptest", 4096);
  EXPECT_FALSE(in_dev_shm(dead)) << dead << " is still in /dev/shm";
  EXPECT_EQ(remove_segments_of_dead_processes(), 0u);
  EXPECT_TRUE(in_dev_shm(live.name())) << live.name() << " of a live process was removed";
}

}  // namespace
}  // namespace tdist
