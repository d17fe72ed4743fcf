// The job token's sources (variable, owner-only file) and the HMAC that proves it.
#include "util/job_token.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "common/scoped_env.h"
#include "tdist/errors.h"

namespace tdist {
namespace {

using testing::ScopedEnv;

std::string temp_file(const std::string& contents, mode_t mode) {
  char path[] = "/tmp/tdist_token_XXXXXX";
  int fd = ::mkstemp(path);
  EXPECT_GE(fd, 0);
  ::close(fd);
  std::ofstream(path, std::ios::binary) << contents;
  ::chmod(path, mode);
  return path;
}

TEST(JobToken, FromVariableThenFileThenNone) {
  ::unsetenv("TDIST_JOB_TOKEN");
  ::unsetenv("TDIST_JOB_TOKEN_FILE");
  EXPECT_FALSE(auth::job_token().has_value());
  std::string path = temp_file("secret-from-file\n", 0600);
  {
    ScopedEnv file("TDIST_JOB_TOKEN_FILE", path);
    EXPECT_EQ(auth::job_token().value(), "secret-from-file");
    ScopedEnv var("TDIST_JOB_TOKEN", "secret-from-variable");
    EXPECT_EQ(auth::job_token().value(), "secret-from-variable");
  }
  std::remove(path.c_str());
}

TEST(JobToken, FileReadableByOthersOrMissingIsRefusedByName) {
  ::unsetenv("TDIST_JOB_TOKEN");
  std::string path = temp_file("secret", 0644);
  {
    ScopedEnv file("TDIST_JOB_TOKEN_FILE", path);
    try {
      auth::job_token();
      FAIL() << "a group-readable token file was accepted";
    } catch (const DistValueError& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("owner only"), std::string::npos) << e.what();
    }
  }
  std::remove(path.c_str());
  ScopedEnv file("TDIST_JOB_TOKEN_FILE", path);
  EXPECT_THROW(auth::job_token(), DistValueError);
}

TEST(JobToken, GeneratedTokensAreLongAndDistinct) {
  std::string a = auth::generate_token(), b = auth::generate_token();
  EXPECT_EQ(a.size(), 64u);
  EXPECT_NE(a, b);
  EXPECT_NE(auth::random_nonce(), auth::random_nonce());
}

TEST(JobToken, HmacDependsOnKeyPartsAndTheirBoundaries) {
  auth::Digest base = auth::hmac("key", {"label", "ab", "c"});
  EXPECT_TRUE(auth::equal(base, auth::hmac("key", {"label", "ab", "c"})));
  EXPECT_FALSE(auth::equal(base, auth::hmac("kez", {"label", "ab", "c"})));
  EXPECT_FALSE(auth::equal(base, auth::hmac("key", {"label", "a", "bc"})));
  EXPECT_FALSE(auth::equal(base, auth::hmac("key", {"other", "ab", "c"})));
}

// exit() while other threads are inside OpenSSL (a connection's HMAC, a
// thread's random state freed as it ends) must not crash in OpenSSL's own exit
// handler: children that exit so, each with three threads that keep starting
// short-lived threads that use OpenSSL, all end with their exit status.
TEST(JobToken, ExitWhileOtherThreadsUseOpenSslEndsCleanly) {
  constexpr int kChildren = 20;
  int clean = 0;
  for (int k = 0; k < kChildren; ++k) {
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      auth::random_nonce();  // initialized before the threads, as init_process_group does
      for (int t = 0; t < 3; ++t)
        std::thread([] {
          for (;;)
            std::thread([] {
              for (int i = 0; i < 20; ++i) (void)auth::hmac("key", {auth::generate_token()});
            }).join();
        }).detach();
      std::this_thread::sleep_for(std::chrono::milliseconds(3));
      std::exit(3);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 3) ++clean;
  }
  EXPECT_EQ(clean, kChildren) << "children that crashed at exit instead of exiting with 3";
}

}  // namespace
}  // namespace tdist
