// A TCP port that is free right now: bind port 0, read the port, release it.
// (Another process could take it before the master binds it; torchrun's
// --standalone has the same window.)
#pragma once

#include <string>

namespace tdistrun {

// Returns the port, or 0 with *error set when no socket could be bound.
int pick_free_port(std::string* error);

}  // namespace tdistrun
