#include "util/shm_leftovers.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <climits>
#include <cstdint>
#include <fstream>
#include <random>

namespace tdist {

namespace {

// The first 8 hex digits of the kernel's boot id, or "0". A pid and a start
// time mean something only within one boot.
const std::string& own_boot() {
  static const std::string boot = [] {
    std::ifstream f("/proc/sys/kernel/random/boot_id");
    std::string id;
    if (!std::getline(f, id) || id.size() < 8) return std::string("0");
    id.resize(8);
    for (char c : id)
      if (!std::isxdigit(static_cast<unsigned char>(c))) return std::string("0");
    return id;
  }();
  return boot;
}

// When this boot began, in seconds since the epoch (/proc/stat's btime); 0 if unknown.
long long boot_time() {
  static const long long btime = [] {
    std::ifstream f("/proc/stat");
    std::string word;
    while (f >> word) {
      if (word == "btime") {
        long long t = 0;
        return (f >> t) ? t : 0LL;
      }
    }
    return 0LL;
  }();
  return btime;
}

// Reads a run of at most `max_digits` characters that `is_digit` accepts from
// the front of `s`; false if there is none or it is too long.
template <typename IsDigit>
bool take_run(std::string_view& s, size_t max_digits, IsDigit is_digit, std::string_view* run) {
  size_t n = 0;
  while (n < s.size() && is_digit(s[n])) ++n;
  if (n == 0 || n > max_digits) return false;
  *run = s.substr(0, n);
  s.remove_prefix(n);
  return true;
}

bool take_number(std::string_view& s, unsigned long long* value) {
  std::string_view run;
  if (!take_run(s, 20, [](char c) { return c >= '0' && c <= '9'; }, &run)) return false;
  unsigned long long v = 0;
  for (char c : run) {
    if (v > (ULLONG_MAX - static_cast<unsigned>(c - '0')) / 10) return false;
    v = v * 10 + static_cast<unsigned>(c - '0');
  }
  *value = v;
  return true;
}

bool take(std::string_view& s, char c) {
  if (s.empty() || s.front() != c) return false;
  s.remove_prefix(1);
  return true;
}

// A creator from another boot ran on a kernel whose pids mean nothing here.
// Its name can outlive it only where /dev/shm is not a tmpfs; such a name is
// provably dead only if it has not changed since this boot began (otherwise
// another kernel may share the directory).
bool creator_gone(const SegmentCreator& c, const struct stat& st) {
  if (!c.boot.empty() && c.boot != "0" && own_boot() != "0" && c.boot != own_boot())
    return boot_time() > 0 && st.st_ctime < boot_time();
  return provably_exited(c.process);
}

}  // namespace

std::string fresh_segment_name(const std::string& tag) {
  static std::atomic<unsigned> counter{0};
  static const unsigned long salt = std::random_device{}();
  // Read each time, not cached: a forked child creates under its own identity.
  const ProcessIdentity me = this_process();
  return "/tdist-" + tag + "-" + std::to_string(me.pid) + "." + std::to_string(me.started) + "." + own_boot() + "-" +
         std::to_string(me.pid_ns) + "-" + std::to_string(counter.fetch_add(1)) + "-" +
         std::to_string(salt ^ static_cast<unsigned long>(
                                   std::chrono::steady_clock::now().time_since_epoch().count()));
}

std::optional<SegmentCreator> creator_of_segment(std::string_view s) {
  constexpr std::string_view kStart = "tdist-";
  if (s.substr(0, kStart.size()) != kStart) return std::nullopt;
  s.remove_prefix(kStart.size());
  std::string_view tag;
  if (!take_run(s, 31, [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }, &tag) ||
      !take(s, '-'))
    return std::nullopt;
  SegmentCreator c;
  unsigned long long pid = 0, started = 0, ns = 0, counter = 0, salt = 0;
  if (!take_number(s, &pid) || pid == 0 || pid > INT32_MAX) return std::nullopt;
  if (take(s, '.')) {
    std::string_view boot;
    if (!take_number(s, &started) || !take(s, '.') ||
        !take_run(s, 8, [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }, &boot))
      return std::nullopt;
    c.boot = std::string(boot);
  }
  if (!take(s, '-') || !take_number(s, &ns) || !take(s, '-') || !take_number(s, &counter) || !take(s, '-') ||
      !take_number(s, &salt) || !s.empty())
    return std::nullopt;
  c.process.pid = static_cast<int32_t>(pid);
  c.process.started = started;
  c.process.pid_ns = ns;
  return c;
}

size_t remove_segments_of_dead_processes() {
  size_t removed = 0;
  DIR* dir = ::opendir("/dev/shm");
  if (!dir) return 0;
  const uid_t me = ::geteuid();
  while (dirent* e = ::readdir(dir)) {
    const std::optional<SegmentCreator> creator = creator_of_segment(e->d_name);
    if (!creator) continue;
    struct stat st {};
    // Only regular files of this user: never through a link, never another user's.
    if (::fstatat(::dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) ||
        st.st_uid != me)
      continue;
    if (!creator_gone(*creator, st)) continue;
    if (::shm_unlink((std::string("/") + e->d_name).c_str()) == 0) ++removed;
  }
  ::closedir(dir);
  return removed;
}

}  // namespace tdist
