// Segments whose creator died before unlinking them are removed by the next
// process on the host that sweeps; a live process's segment never is, nor a
// name of another user, pid namespace or boot, nor anything not a plain file.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <random>
#include <string>
#include <vector>

#include "util/process_identity.h"
#include "util/shm_segment.h"

namespace tdist {
namespace {

bool in_dev_shm(const std::string& name) {
  struct stat st {};
  return ::lstat(("/dev/shm" + name).c_str(), &st) == 0;
}

// A name no other test run on this host picks.
std::string unique_tail() {
  static std::mt19937_64 rng{std::random_device{}()};
  return std::to_string(rng() >> 1);
}

// Creates /dev/shm<name> as a plain file of this user (as shm_open would).
void make_fake(const std::string& name) {
  int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  ASSERT_GE(fd, 0) << name;
  ::close(fd);
}

// "/tdist-cleanuptest-<pid>.<start>.<boot>-<ns>-0-<unique>": a name of the current form.
std::string fake_name(int32_t pid, uint64_t started, const std::string& boot, uint64_t ns) {
  return "/tdist-cleanuptest-" + std::to_string(pid) + "." + std::to_string(started) + "." + boot + "-" +
         std::to_string(ns) + "-0-" + unique_tail();
}

// The boot field this host's names carry.
std::string own_boot() {
  ShmSegment probe = ShmSegment::create("cleanuptest", 4096);
  auto c = creator_of_segment(probe.name().substr(1));
  return c ? c->boot : "0";
}

// A pid that has exited and been reaped (it may be reused later: only tests
// whose expectation holds either way use it).
int32_t reaped_pid() {
  pid_t child = ::fork();
  if (child == 0) _exit(0);
  ::waitpid(child, nullptr, 0);
  return static_cast<int32_t>(child);
}

// A child that creates a segment, reports its name through a pipe, and then
// sleeps until it is killed: a rank SIGKILLed inside the set-up window.
struct CreatorChild {
  pid_t pid = -1;
  std::string name;
};
CreatorChild start_creator() {
  int fds[2];
  if (::pipe(fds) != 0) return {};
  pid_t child = ::fork();
  if (child == 0) {
    ::close(fds[0]);
    ShmSegment seg = ShmSegment::create("cleanuptest", 4096);
    const std::string& name = seg.name();
    if (::write(fds[1], name.data(), name.size()) != static_cast<ssize_t>(name.size())) _exit(2);
    ::close(fds[1]);
    for (int i = 0; i < 600; ++i) ::usleep(100 * 1000);  // a bound if the test goes wrong
    _exit(0);
  }
  ::close(fds[1]);
  char buf[256] = {0};
  ssize_t n = ::read(fds[0], buf, sizeof(buf) - 1);
  ::close(fds[0]);
  return {child, n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string()};
}

TEST(ShmCleanup, SegmentsOfDeadCreatorsAreRemovedAndLiveOnesKept) {
  // Dies as kill -9 would leave it: the name created, never unlinked. Its name
  // is looked at while it lives: once it is dead, any tdist process on the
  // host that sweeps (another test running alongside) may remove it first.
  CreatorChild c = start_creator();
  ASSERT_GT(c.pid, 0);
  ASSERT_TRUE(in_dev_shm(c.name)) << c.name;
  ASSERT_EQ(::kill(c.pid, SIGKILL), 0);
  ASSERT_EQ(::waitpid(c.pid, nullptr, 0), c.pid);

  // This process's first segment sweeps the leftovers; it stays, being alive.
  ShmSegment live = ShmSegment::create("cleanuptest", 4096);
  EXPECT_FALSE(in_dev_shm(c.name)) << c.name << " is still in /dev/shm";
  remove_segments_of_dead_processes();
  EXPECT_TRUE(in_dev_shm(live.name())) << live.name() << " of a live process was removed";
}

TEST(ShmCleanup, ACreatorKilledWithSigkillLosesItsSegmentEvenBeforeItIsReaped) {
  CreatorChild c = start_creator();
  ASSERT_GT(c.pid, 0);
  ASSERT_FALSE(c.name.empty());
  // Alive: kept, however often anyone sweeps.
  remove_segments_of_dead_processes();
  EXPECT_TRUE(in_dev_shm(c.name)) << c.name << " of a live child was removed";

  ASSERT_EQ(::kill(c.pid, SIGKILL), 0);
  // A zombie until reaped: its whole process has exited, so it is dead already.
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(c.pid), &info, WEXITED | WNOWAIT), 0);
  remove_segments_of_dead_processes();
  EXPECT_FALSE(in_dev_shm(c.name)) << c.name << " of a killed (zombie) creator is still in /dev/shm";
  ::waitpid(c.pid, nullptr, 0);
  ::shm_unlink(c.name.c_str());
}

TEST(ShmCleanup, APidHeldByAProcessWithAnotherStartTimeIsDead) {
  const ProcessIdentity me = this_process();
  ASSERT_GT(me.started, 0u) << "/proc/self/stat has no start time";
  const std::string boot = own_boot();
  // Our pid, but not our start time: the pid was reused, its creator is gone.
  const std::string reused = fake_name(me.pid, me.started + 1, boot, me.pid_ns);
  // Our pid and start time: us.
  const std::string ours = fake_name(me.pid, me.started, boot, me.pid_ns);
  make_fake(reused);
  make_fake(ours);
  remove_segments_of_dead_processes();
  EXPECT_FALSE(in_dev_shm(reused)) << reused;
  EXPECT_TRUE(in_dev_shm(ours)) << ours;
  ::shm_unlink(reused.c_str());
  ::shm_unlink(ours.c_str());
}

TEST(ShmCleanup, NamesOfTheOlderFormAreJudgedByTheirPid) {
  const ProcessIdentity me = this_process();
  const std::string ns = std::to_string(me.pid_ns);
  // The form before start times: tdist-<tag>-<pid>-<ns>-<counter>-<salt>.
  const std::string alive = "/tdist-cleanuptest-" + std::to_string(me.pid) + "-" + ns + "-0-" + unique_tail();
  CreatorChild c = start_creator();  // a pid that is certainly dead once reaped below
  ASSERT_GT(c.pid, 0);
  const std::string dead = "/tdist-cleanuptest-" + std::to_string(c.pid) + "-" + ns + "-0-" + unique_tail();
  make_fake(alive);
  make_fake(dead);
  remove_segments_of_dead_processes();
  EXPECT_TRUE(in_dev_shm(dead)) << dead << ": its pid is alive";
  ::kill(c.pid, SIGKILL);
  ::waitpid(c.pid, nullptr, 0);
  remove_segments_of_dead_processes();
  EXPECT_FALSE(in_dev_shm(dead)) << dead;
  EXPECT_TRUE(in_dev_shm(alive)) << alive;
  for (const auto& n : {alive, dead, c.name}) ::shm_unlink(n.c_str());
}

TEST(ShmCleanup, OtherNamespacesBootsUsersAndLinksAreNeverTouched) {
  const ProcessIdentity me = this_process();
  const int32_t dead = reaped_pid();
  const std::string boot = own_boot();
  std::vector<std::string> kept;
  // Another pid namespace: its pids mean nothing here.
  kept.push_back(fake_name(dead, 1, boot, me.pid_ns + 1));
  // Another boot, changed since this one began: another kernel may share /dev/shm.
  if (boot != "0") kept.push_back(fake_name(dead, 1, boot == "0badf00d" ? "0badf00e" : "0badf00d", me.pid_ns));
  for (const auto& n : kept) make_fake(n);
  // A symbolic link under a dead creator's name.
  const std::string link = fake_name(dead, 1, boot, me.pid_ns);
  ASSERT_EQ(::symlink("/nonexistent-tdist-target", ("/dev/shm" + link).c_str()), 0);
  kept.push_back(link);
  // Another user's file (only root can make one).
  if (::geteuid() == 0) {
    const std::string theirs = fake_name(dead, 1, boot, me.pid_ns);
    make_fake(theirs);
    ASSERT_EQ(::chown(("/dev/shm" + theirs).c_str(), 65534, 65534), 0);
    kept.push_back(theirs);
  }
  remove_segments_of_dead_processes();
  for (const auto& n : kept) EXPECT_TRUE(in_dev_shm(n)) << n << " was removed";
  for (const auto& n : kept) ::unlink(("/dev/shm" + n).c_str());
}

TEST(ShmCleanup, OnlyWellFormedNamesAreRead) {
  auto c = creator_of_segment("tdist-arena-42.1234.0a1b2c3d-4026531836-7-99");
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->process.pid, 42);
  EXPECT_EQ(c->process.started, 1234u);
  EXPECT_EQ(c->process.pid_ns, 4026531836u);
  EXPECT_EQ(c->boot, "0a1b2c3d");
  auto old = creator_of_segment("tdist-p2p-42-4026531836-7-99");
  ASSERT_TRUE(old.has_value());
  EXPECT_EQ(old->process.started, 0u);
  EXPECT_EQ(old->boot, "");
  for (const char* bad : {"tdist-arena-42", "tdist-arena-42-1-2", "tdist-Arena-42-1-2-3", "tdist--42-1-2-3",
                          "tdist-arena-0-1-2-3", "tdist-arena-4294967296-1-2-3", "tdist-arena-42-1-2-3-4",
                          "tdist-arena-42.1-1-2-3", "tdist-arena-42.1.xyz-1-2-3", "tdist-arena-42.1.123456789-1-2-3",
                          "tdist-arena-42-1-2-99999999999999999999999", "other-arena-42-1-2-3",
                          "tdist-arena-42-1-2-3 "})
    EXPECT_FALSE(creator_of_segment(bad).has_value()) << bad;
  // What this process creates, it reads back as itself.
  ShmSegment seg = ShmSegment::create("cleanuptest", 4096);
  auto mine = creator_of_segment(seg.name().substr(1));
  ASSERT_TRUE(mine.has_value()) << seg.name();
  const ProcessIdentity me = this_process();
  EXPECT_EQ(mine->process.pid, me.pid);
  EXPECT_EQ(mine->process.started, me.started);
  EXPECT_EQ(mine->process.pid_ns, me.pid_ns);
}

}  // namespace
}  // namespace tdist
