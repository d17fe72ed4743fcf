// The error file of a launched process (TORCHELASTIC_ERROR_FILE, set by
// tdistrun and torchrun): an error that ends the process is written there in
// torch's JSON, {"message": {"message": ..., "extraInfo": {"py_callstack":
// ..., "timestamp": ...}}}, so the launcher's failure summary can show it.
// In C++ that is an uncaught exception (the terminate handler this file
// installs when the library loads); Python's tdist module writes its
// tracebacks through the same function.
#pragma once

#include <string>

namespace tdist {

// Writes the file (atomically: a temporary beside it, then rename) when
// TORCHELASTIC_ERROR_FILE is set; returns whether it did. Never throws.
bool write_error_file(const std::string& message, const std::string& py_callstack = "");

}  // namespace tdist
