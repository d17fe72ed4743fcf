// A POSIX shared-memory segment that several processes of one host map.
// One process creates it under a fresh name and hands the name to the others
// (through the store or a socket); once every one has opened it, the creator
// unlinks the name so that nothing is left in /dev/shm even if a process
// crashes later. The mapping lives until every process unmaps it.
#pragma once

#include <cstddef>
#include <string>

#include "util/shm_leftovers.h"

namespace tdist {

class ShmSegment {
 public:
  ShmSegment() = default;
  // Creates a segment of `size` bytes, zero-filled, under a new unique name
  // starting with "/tdist-<tag>-" that names this process (shm_leftovers.h:
  // the first create of each process removes names that dead ones left).
  // The space is reserved at once (posix_fallocate), so a full /dev/shm is a
  // DistBackendError here rather than a SIGBUS on first touch.
  static ShmSegment create(const std::string& tag, size_t size);
  // Maps an existing segment; DistBackendError if it is missing or smaller
  // than `size`.
  static ShmSegment open(const std::string& name, size_t size);

  ShmSegment(ShmSegment&& other) noexcept;
  ShmSegment& operator=(ShmSegment&& other) noexcept;
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;
  // Unmaps; unlinks the name too if this process created it and has not yet.
  ~ShmSegment();

  // Removes the name (idempotent); the mappings stay valid.
  void unlink();
  // Removes the name whoever created it (idempotent): for a process that
  // knows every process meant to map the segment has mapped it, so that the
  // name goes even if its creator died before unlinking it.
  void remove_name();

  void* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& name() const { return name_; }
  bool valid() const { return data_ != nullptr; }

 private:
  void release();

  void* data_ = nullptr;
  size_t size_ = 0;
  std::string name_;
  bool owns_name_ = false;  // created here and not yet unlinked
};

// Whether shared memory may be used: TDIST_SHM is unset or not "0".
bool shm_enabled();

}  // namespace tdist
