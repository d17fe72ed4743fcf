// The timeout of a group made without one: TDIST_TIMEOUT where set, else
// torch's 30 minutes (kDefaultTimeout).
#pragma once

#include <chrono>

namespace tdist {

// `given` unless it is kUnsetTimeout; then TDIST_TIMEOUT (seconds, a positive
// number, fractions allowed), else kDefaultTimeout. DistValueError naming the
// variable when its value is not a positive number.
std::chrono::milliseconds resolve_timeout(std::chrono::milliseconds given);

}  // namespace tdist
