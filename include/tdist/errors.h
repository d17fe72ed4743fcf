// The error hierarchy of torch.distributed: DistError > DistBackendError,
// DistNetworkError, DistStoreError. Messages name rank, group, operation,
// sequence number, peer and timeout wherever they apply (see ErrorContext).
#pragma once

#include <chrono>
#include <stdexcept>
#include <string>

namespace tdist {

class DistError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A collective or point-to-point operation failed (timeout, mismatch, peer error).
class DistBackendError : public DistError {
 public:
  using DistError::DistError;
};

// A connection could not be made, or broke.
class DistNetworkError : public DistError {
 public:
  using DistError::DistError;
};

// A key-value store operation failed (missing key after timeout, bad request, ...).
class DistStoreError : public DistError {
 public:
  using DistError::DistError;
};

// A non-blocking Store::queue_pop found the queue empty (torch's
// DistQueueEmptyError; QueueEmptyError in Python).
class DistQueueEmptyError : public DistStoreError {
 public:
  using DistStoreError::DistStoreError;
};

// A caller passed something invalid (bad rank, dtype/op combination, size).
// Raised before anything is sent, so the group stays usable.
class DistValueError : public DistError {
 public:
  using DistError::DistError;
};

}  // namespace tdist
