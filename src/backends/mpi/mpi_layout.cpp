#include "backends/mpi/mpi_layout.h"

#include <climits>
#include <cstdint>
#include <cstring>

#include "tdist/errors.h"

namespace tdist::mpi {

int element_count(const Tensor& t, const char* op, const std::string& who) {
  if (t.numel() > INT_MAX)
    throw DistBackendError(who + ": " + op + " of " + t.str() + ": " + std::to_string(t.numel()) +
                           " elements exceed MPI's int counts (2^31-1); split the tensor");
  return static_cast<int>(t.numel());
}

std::shared_ptr<Layout> Layout::of(const std::vector<Tensor>& parts, const char* op, const std::string& who) {
  auto l = std::make_shared<Layout>();
  l->parts_ = parts;
  l->who_ = &who;
  l->op_ = op;
  if (parts.empty()) return l;
  l->element_size_ = parts[0].element_size();
  for (const Tensor& p : parts) l->counts_.push_back(element_count(p, op, who));
  // The lowest part is the base; each other part must lie a whole number of
  // elements (fitting an int) above it.
  char* low = nullptr;
  for (const Tensor& p : parts)
    if (p.numel() > 0 && (!low || static_cast<char*>(p.data()) < low)) low = static_cast<char*>(p.data());
  l->base_ = low;
  bool fits = true;
  for (const Tensor& p : parts) {
    if (p.numel() == 0) {
      l->displs_.push_back(0);
      continue;
    }
    const uintptr_t off = static_cast<uintptr_t>(static_cast<char*>(p.data()) - low);
    fits = fits && off % l->element_size_ == 0 && off / l->element_size_ <= static_cast<uintptr_t>(INT_MAX);
    l->displs_.push_back(fits ? static_cast<int>(off / l->element_size_) : 0);
  }
  if (!fits) l->force_stage();
  return l;
}

bool Layout::equal_in_order() const {
  for (size_t i = 0; i < counts_.size(); ++i)
    if (counts_[i] != counts_[0] || static_cast<int64_t>(displs_[i]) != static_cast<int64_t>(i) * counts_[0])
      return false;
  return true;
}

bool Layout::overlaps(const Tensor& t) const {
  const char* a = static_cast<const char*>(t.data());
  const char* b = a + t.nbytes();
  for (const Tensor& p : parts_) {
    const char* c = static_cast<const char*>(p.data());
    if (p.nbytes() > 0 && t.nbytes() > 0 && c < b && a < c + p.nbytes()) return true;
  }
  return false;
}

void Layout::force_stage() {
  if (force_) return;
  force_ = true;
  size_t total = 0;
  for (size_t i = 0; i < counts_.size(); ++i) {
    if (total > static_cast<size_t>(INT_MAX))
      throw DistBackendError(*who_ + ": " + op_ + ": a list of " + std::to_string(counts_.size()) +
                             " tensors exceeds MPI's int displacements (2^31-1 elements)");
    displs_[i] = static_cast<int>(total);
    total += static_cast<size_t>(counts_[i]);
  }
  staging_.resize(std::max<size_t>(total * element_size_, 1));
}

void Layout::stage_in() {
  if (!staged()) return;
  for (size_t i = 0; i < parts_.size(); ++i)
    if (parts_[i].nbytes() > 0)
      std::memcpy(staging_.data() + static_cast<size_t>(displs_[i]) * element_size_, parts_[i].data(),
                  parts_[i].nbytes());
}

void Layout::unstage() {
  if (!staged()) return;
  for (size_t i = 0; i < parts_.size(); ++i)
    if (parts_[i].nbytes() > 0)
      std::memcpy(parts_[i].data(), staging_.data() + static_cast<size_t>(displs_[i]) * element_size_,
                  parts_[i].nbytes());
}

}  // namespace tdist::mpi
