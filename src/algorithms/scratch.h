// Scratch memory for the algorithms, reused across collectives run by the
// same thread (a group's queue thread runs them one at a time). A fresh
// allocation of a large buffer is returned to the system when freed and
// faults its pages in again on the next call: measured, that cost more than
// the transfer itself (docs/tuning_log.md: Scratch memory).
#pragma once

#include <cstddef>
#include <memory>

namespace tdist {

class Scratch {
 public:
  Scratch() = default;
  // At least `bytes` bytes, not zero-filled (always written before read).
  explicit Scratch(size_t bytes);
  ~Scratch();
  Scratch(Scratch&& o) noexcept : data_(std::move(o.data_)), capacity_(o.capacity_) { o.capacity_ = 0; }
  Scratch& operator=(Scratch&& o) noexcept;
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;

  char* get() const { return data_.get(); }

 private:
  void release();
  std::unique_ptr<char[]> data_;
  size_t capacity_ = 0;
};

inline Scratch make_scratch(size_t bytes) { return Scratch(bytes); }

}  // namespace tdist
