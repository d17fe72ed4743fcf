// Writing JSON: strings escaped, and bytes that are not valid UTF-8 (a hostile or truncated
// input's) replaced by U+FFFD, so that what the tool writes always parses.
#pragma once

#include <string>
#include <string_view>

#include "json.h"

namespace ttrace {

// Appends s as a quoted JSON string.
void append_json_string(std::string& out, std::string_view s);

// Appends v; indent < 0 writes one line, indent >= 0 pretty-prints at that starting depth
// (two spaces a level).
void append_json(std::string& out, const JsonValue& v, int indent = -1);

// s with every invalid UTF-8 sequence replaced by U+FFFD.
std::string valid_utf8(std::string_view s);

}  // namespace ttrace
