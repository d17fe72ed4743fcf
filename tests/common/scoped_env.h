// Sets an environment variable for a scope and restores what was there (set
// before any world starts: tests run one per process under ctest, and no other
// thread reads the environment meanwhile).
#pragma once

#include <cstddef>
#include <cstdlib>
#include <string>

namespace tdist::testing {

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) {
      had_old_ = true;
      old_ = old;
    }
    setenv(name, value.c_str(), 1);
  }
  // Unsets it for the scope.
  ScopedEnv(const char* name, std::nullptr_t) : name_(name) {
    if (const char* old = std::getenv(name)) {
      had_old_ = true;
      old_ = old;
    }
    unsetenv(name);
  }
  ~ScopedEnv() {
    if (had_old_)
      setenv(name_, old_.c_str(), 1);
    else
      unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  bool had_old_ = false;
  std::string old_;
};

}  // namespace tdist::testing
