#include "util/shm_segment.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <random>
#include <utility>

#include "tdist/errors.h"
#include "util/settings.h"
#include "util/socket.h"

namespace tdist {

namespace {

// The inode of this process's pid namespace: a pid in a segment's name means
// something only to processes of the same namespace.
const std::string& pid_namespace() {
  static const std::string ns = [] {
    struct stat st {};
    return ::stat("/proc/self/ns/pid", &st) == 0 ? std::to_string(st.st_ino) : std::string("0");
  }();
  return ns;
}

std::string fresh_name(const std::string& tag) {
  static std::atomic<unsigned> counter{0};
  static const unsigned long salt = std::random_device{}();
  return "/tdist-" + tag + "-" + std::to_string(::getpid()) + "-" + pid_namespace() + "-" +
         std::to_string(counter.fetch_add(1)) + "-" +
         std::to_string(salt ^ static_cast<unsigned long>(
                                    std::chrono::steady_clock::now().time_since_epoch().count()));
}

void* map_fd(int fd, size_t size, const std::string& name) {
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED)
    throw DistBackendError("cannot map shared memory segment " + name + " (" + std::to_string(size) +
                           " bytes): " + errno_string(errno));
  return p;
}

}  // namespace

size_t remove_segments_of_dead_processes() {
  size_t removed = 0;
  DIR* dir = ::opendir("/dev/shm");
  if (!dir) return 0;
  while (dirent* e = ::readdir(dir)) {
    // tdist-<tag>-<pid>-<pid namespace>-<counter>-<salt>
    unsigned long pid = 0, ns = 0;
    char tag[32];
    if (std::sscanf(e->d_name, "tdist-%31[a-z0-9]-%lu-%lu-", tag, &pid, &ns) != 3) continue;
    if (std::to_string(ns) != pid_namespace() || pid == 0) continue;
    struct stat st {};
    const std::string path = std::string("/dev/shm/") + e->d_name;
    if (::stat(path.c_str(), &st) != 0 || st.st_uid != ::geteuid()) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;  // alive, or not ours to judge
    if (::shm_unlink((std::string("/") + e->d_name).c_str()) == 0) ++removed;
  }
  ::closedir(dir);
  return removed;
}

ShmSegment ShmSegment::create(const std::string& tag, size_t size) {
  // A process killed between creating a segment and unlinking it leaves the
  // name behind; the next creator on the host removes such names.
  static std::once_flag swept;
  std::call_once(swept, [] { remove_segments_of_dead_processes(); });
  ShmSegment seg;
  seg.name_ = fresh_name(tag);
  Fd fd(::shm_open(seg.name_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!fd.valid())
    throw DistBackendError("cannot create shared memory segment " + seg.name_ + ": " + errno_string(errno) +
                           " (set TDIST_SHM=0 to communicate over TCP only)");
  seg.owns_name_ = true;
  int rc = ::posix_fallocate(fd.get(), 0, static_cast<off_t>(size));
  if (rc != 0) {
    seg.unlink();
    throw DistBackendError("cannot reserve " + std::to_string(size) + " bytes of shared memory for " + seg.name_ +
                           ": " + errno_string(rc) + " (is /dev/shm full? set TDIST_SHM=0 to use TCP only)");
  }
  try {
    seg.data_ = map_fd(fd.get(), size, seg.name_);
  } catch (...) {
    seg.unlink();
    throw;
  }
  seg.size_ = size;
  return seg;
}

ShmSegment ShmSegment::open(const std::string& name, size_t size) {
  ShmSegment seg;
  seg.name_ = name;
  Fd fd(::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600));
  if (!fd.valid()) throw DistBackendError("cannot open shared memory segment " + name + ": " + errno_string(errno));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || static_cast<size_t>(st.st_size) < size)
    throw DistBackendError("shared memory segment " + name + " has " + std::to_string(st.st_size) +
                           " bytes, expected " + std::to_string(size));
  seg.data_ = map_fd(fd.get(), size, name);
  seg.size_ = size;
  return seg;
}

ShmSegment::ShmSegment(ShmSegment&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      name_(std::move(other.name_)),
      owns_name_(std::exchange(other.owns_name_, false)) {}

ShmSegment& ShmSegment::operator=(ShmSegment&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    name_ = std::move(other.name_);
    owns_name_ = std::exchange(other.owns_name_, false);
  }
  return *this;
}

ShmSegment::~ShmSegment() { release(); }

void ShmSegment::release() {
  unlink();
  if (data_) ::munmap(data_, size_);
  data_ = nullptr;
  size_ = 0;
}

void ShmSegment::unlink() {
  if (!owns_name_) return;
  ::shm_unlink(name_.c_str());
  owns_name_ = false;
}

bool shm_enabled() { return settings::get<"TDIST_SHM">(); }

}  // namespace tdist
