#include "job_token.h"

#include <sys/random.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace tdistrun {

namespace {

std::string random_hex(size_t bytes) {
  std::string raw(bytes, '\0');
  for (size_t got = 0; got < bytes;) {
    ssize_t n = ::getrandom(raw.data() + got, bytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw std::runtime_error(std::string("cannot make a job token: getrandom failed: ") + std::strerror(errno));
    got += static_cast<size_t>(n);
  }
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char b : raw) {
    out.push_back(digits[b >> 4]);
    out.push_back(digits[b & 15]);
  }
  return out;
}

bool set(const EnvLookup& env, const char* name) {
  auto v = env(name);
  return v && !v->empty();
}

}  // namespace

std::string job_token_for_workers(Options& opt, const EnvLookup& env) {
  if (set(env, "TDIST_JOB_TOKEN") || set(env, "TDIST_JOB_TOKEN_FILE")) return "";
  if (opt.nnodes > 1) {
    opt.warnings.push_back("no TDIST_JOB_TOKEN or TDIST_JOB_TOKEN_FILE is set, and the " + std::to_string(opt.nnodes) +
                           " nodes must share one: the job is open to any process that reaches its store and "
                           "ranks (set the same TDIST_JOB_TOKEN_FILE on every node)");
    return "";
  }
  return random_hex(32);
}

}  // namespace tdistrun
