// Reads one flight recorder dump (docs/trace_format.md) into a Dump, checking every field.
#pragma once

#include <string>

#include "json.h"
#include "records.h"

namespace ttrace {

inline constexpr int64_t kDumpVersion = 1;

// Throws InputError naming the file, the line and what is wrong.
Dump read_dump(const std::string& path);

// The dump in text already read (for tests and for read_dump).
Dump parse_dump(const std::string& path, const std::string& text);

}  // namespace ttrace
