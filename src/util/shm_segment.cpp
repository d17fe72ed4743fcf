#include "util/shm_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <mutex>
#include <utility>

#include "tdist/errors.h"
#include "util/settings.h"
#include "util/socket.h"

namespace tdist {

namespace {

void* map_fd(int fd, size_t size, const std::string& name) {
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED)
    throw DistBackendError("cannot map shared memory segment " + name + " (" + std::to_string(size) +
                           " bytes): " + errno_string(errno));
  return p;
}

}  // namespace

ShmSegment ShmSegment::create(const std::string& tag, size_t size) {
  // A process killed between creating a segment and unlinking it leaves the
  // name behind; the next creator on the host removes such names.
  static std::once_flag swept;
  std::call_once(swept, [] { remove_segments_of_dead_processes(); });
  ShmSegment seg;
  seg.name_ = fresh_segment_name(tag);
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

void ShmSegment::remove_name() {
  if (name_.empty()) return;
  ::shm_unlink(name_.c_str());  // ENOENT when another process removed it first
  owns_name_ = false;
}

bool shm_enabled() { return settings::get<"TDIST_SHM">(); }

}  // namespace tdist
