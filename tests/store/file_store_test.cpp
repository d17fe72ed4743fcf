// FileStore: processes sharing a file, the file's life cycle, and files left
// behind by runs that crashed.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>

#include "common/harness.h"
#include "store/file_store_format.h"
#include "tdist/errors.h"
#include "tdist/store.h"

using namespace std::chrono_literals;
using tdist::DistStoreError;
using tdist::FileStore;
namespace sd = tdist::store_detail;
namespace tt = tdist::testing;

namespace {

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// Removes the file when the test ends, whatever happened.
struct TempFile {
  std::string path = tt::temp_path("filestore");
  ~TempFile() { ::unlink(path.c_str()); }
};

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

// Forks a child that opens a FileStore on path, runs fn on it and dies with
// the store still open (no destructor runs): by SIGKILL or by _exit.
void open_and_die(const std::string& path, int world_size, const std::function<void(FileStore&)>& fn, bool sigkill) {
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    try {
      auto* store = new FileStore(path, world_size, 5s);  // never deleted
      fn(*store);
    } catch (...) {
      _exit(3);
    }
    if (sigkill) ::raise(SIGKILL);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  if (sigkill) {
    ASSERT_TRUE(WIFSIGNALED(status));
  } else {
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
}

// The ranks' program: exchange values, count arrivals, meet at a barrier.
// With a stale counter from an earlier run, "arrived" never equals world
// and everyone would wait for "go" until the timeout.
void rank_program(FileStore& store, int rank, int world) {
  store.set("rank/" + std::to_string(rank), std::to_string(rank * 10));
  std::vector<std::string> keys;
  for (int r = 0; r < world; ++r) keys.push_back("rank/" + std::to_string(r));
  auto values = store.multi_get(keys);
  for (int r = 0; r < world; ++r)
    if (values[r] != std::to_string(r * 10)) throw std::runtime_error("bad value of rank " + std::to_string(r));
  if (store.add("arrived", 1) == world) store.set("go", "1");
  store.wait({"go"});
}

TEST(FileStore, ProcessesShareTheFileAndTheLastUserRemovesIt) {
  for (int world = 2; world <= 4; ++world) {
    SCOPED_TRACE("world size " + std::to_string(world));
    TempFile file;
    auto results = tt::run_in_processes(world, [&](int rank) {
      FileStore store(file.path, world, 30s);
      EXPECT_EQ(store.path(), file.path);
      rank_program(store, rank, world);
    });
    EXPECT_EQ(tt::describe_failures(results), "");
    EXPECT_FALSE(exists(file.path)) << "the last of " << world << " users did not remove " << file.path;
  }
}

TEST(FileStore, FileRemovedOnlyAfterWorldSizeUsersLeft) {
  TempFile file;
  {
    FileStore a(file.path, 2, 5s);
    a.set("k", "v");
  }
  EXPECT_TRUE(exists(file.path));  // one of two users has come and gone
  {
    FileStore b(file.path, 2, 5s);
    EXPECT_EQ(b.get("k"), "v");
  }
  EXPECT_FALSE(exists(file.path));
}

TEST(FileStore, WithoutWorldSizeKeysArePreservedAcrossStores) {
  // As the seeds say: destroying the store and creating another on the same
  // file keeps the keys.
  TempFile file;
  {
    FileStore a(file.path);
    a.set("kept", "yes");
    EXPECT_EQ(a.num_keys(), 1);
  }
  EXPECT_TRUE(exists(file.path));
  FileStore b(file.path, -1, 5s);
  EXPECT_EQ(b.get("kept"), "yes");
  EXPECT_EQ(b.num_keys(), 1);
}

TEST(FileStore, TwoStoresInOneProcessExcludeEachOther) {
  // fcntl locks are per process: the stores must also exclude each other.
  TempFile file;
  FileStore a(file.path, 2, 30s), b(file.path, 2, 30s);
  tt::run_in_threads(8, [&](int t) {
    FileStore& s = t % 2 ? a : b;
    for (int i = 0; i < 50; ++i) s.add("counter", 1);
  });
  EXPECT_EQ(a.get("counter"), "400");
}

TEST(FileStore, FileOfAKilledRunDoesNotDeadlockTheNextRun) {
  for (bool sigkill : {false, true}) {
    SCOPED_TRACE(sigkill ? "SIGKILL" : "_exit");
    TempFile file;
    open_and_die(
        file.path, 2,
        [](FileStore& store) {
          store.add("arrived", 2);  // as if both ranks of the crashed run had arrived
          store.set("stale", "from the crashed run");
        },
        sigkill);
    ASSERT_TRUE(exists(file.path));
    auto results = tt::run_in_processes(2, [&](int rank) {
      FileStore store(file.path, 2, 5s);
      rank_program(store, rank, 2);
      if (store.check({"stale"})) throw std::runtime_error("state of the crashed run survived");
    });
    EXPECT_EQ(tt::describe_failures(results), "");
    EXPECT_FALSE(exists(file.path));
  }
}

TEST(FileStore, StateThatCannotBeProvenDeadIsNamedInTimeouts) {
  TempFile file;
  // A user on another host that never left, and its key.
  sd::UserId remote{.host = "tdist-test-some-other-host", .boot_id = "x", .pid_ns = "pid:[1]", .pid = 4242, .start_time = 1, .nonce = 1};
  std::string bytes = sd::encode_file_header(77);
  sd::encode_record(bytes, sd::RecordType::kJoin, remote.encode(), "");
  sd::encode_record(bytes, sd::RecordType::kSet, "old-key", "old-value");
  write_file(file.path, bytes);

  FileStore store(file.path, -1, 1s);
  EXPECT_TRUE(store.check({"old-key"}));  // not reset: that user may be alive
  try {
    store.get("new-key");
    FAIL() << "get of a missing key returned";
  } catch (const DistStoreError& e) {
    std::string msg = e.what();
    EXPECT_TRUE(contains(msg, "'new-key'")) << msg;
    EXPECT_TRUE(contains(msg, "1000 ms")) << msg;
    EXPECT_TRUE(contains(msg, "earlier run")) << msg;
    EXPECT_TRUE(contains(msg, file.path)) << msg;
    EXPECT_TRUE(contains(msg, "tdist-test-some-other-host")) << msg;
  }
  try {
    store.wait({"w"}, 1s);
    FAIL() << "wait for a missing key returned";
  } catch (const DistStoreError& e) {
    EXPECT_TRUE(contains(e.what(), "earlier run")) << e.what();
  }
}

TEST(FileStore, DeadUserNextToALiveOneIsNamedInTimeouts) {
  TempFile file;
  // A live user, then one that crashes: the file cannot be reset (one user
  // still runs), but the dead one is named.
  FileStore first(file.path, -1, 5s);
  open_and_die(file.path, -1, [](FileStore&) {}, true);
  FileStore second(file.path, -1, 1s);
  try {
    second.get("missing");
    FAIL();
  } catch (const DistStoreError& e) {
    EXPECT_TRUE(contains(e.what(), "holds state of an earlier run")) << e.what();
    EXPECT_TRUE(contains(e.what(), "died")) << e.what();
  }
}

TEST(FileStore, RecordCutShortByADyingWriterIsDropped) {
  TempFile file;
  std::string bytes = sd::encode_file_header(5);
  sd::encode_record(bytes, sd::RecordType::kSet, "whole", "1");
  std::string cut;
  sd::encode_record(cut, sd::RecordType::kSet, "cut", "never complete");
  bytes += cut.substr(0, cut.size() - 3);
  write_file(file.path, bytes);
  {
    FileStore store(file.path, -1, 1s);
    EXPECT_EQ(store.get("whole"), "1");
    EXPECT_FALSE(store.check({"cut"}));
    store.set("next", "2");  // cuts the partial record off first
  }
  FileStore again(file.path, -1, 1s);
  EXPECT_EQ(again.get("whole"), "1");
  EXPECT_EQ(again.get("next"), "2");
  EXPECT_EQ(again.num_keys(), 2);
}

TEST(FileStore, AFileThatIsNotAFileStoreIsRejected) {
  TempFile file;
  write_file(file.path, "this is somebody's notes, not a store\n");
  try {
    FileStore store(file.path, -1, 1s);
    FAIL() << "opened a foreign file";
  } catch (const DistStoreError& e) {
    EXPECT_TRUE(contains(e.what(), file.path)) << e.what();
    EXPECT_TRUE(contains(e.what(), "not a tdist FileStore")) << e.what();
  }
  write_file(file.path, "abc");  // short ones too
  EXPECT_THROW(FileStore(file.path, -1, 1s), DistStoreError);
}

TEST(FileStore, UnopenablePathNamesIt) {
  std::string path = "/nonexistent-dir-for-tdist-tests/store";
  try {
    FileStore store(path, 1, 1s);
    FAIL();
  } catch (const DistStoreError& e) {
    EXPECT_TRUE(contains(e.what(), path)) << e.what();
  }
}

}  // namespace
