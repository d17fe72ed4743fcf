// The error file a worker leaves behind (TORCHELASTIC_ERROR_FILE), in torch's
// format: {"message": {"message": "...", "extraInfo": {"py_callstack": "...",
// "timestamp": "..."}}}. tdist writes it for an uncaught error, as torch's
// @record does; the launcher shows it in the failure summary.
#pragma once

#include <optional>
#include <string>

namespace tdistrun {

struct WorkerError {
  std::string message;
  std::string traceback;  // Python's, when there is one
};

// nullopt when the file is missing, too large (over 1 MiB) or not in that format.
std::optional<WorkerError> read_error_file(const std::string& path);

}  // namespace tdistrun
