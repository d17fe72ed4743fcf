// Re-raising an error with context in front of its message, keeping its type
// in the DistError hierarchy.
#pragma once

#include <exception>
#include <string>

namespace tdist {

// A copy of `error` whose message is prefix + the original message. Errors
// outside the hierarchy become DistBackendError.
std::exception_ptr with_context(std::exception_ptr error, const std::string& prefix);
// The message of an exception_ptr, for composing messages.
std::string error_message(std::exception_ptr error);

}  // namespace tdist
