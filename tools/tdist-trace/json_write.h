// Writing JSON: strings escaped, and bytes that are not valid UTF-8 (a hostile or truncated
// input's) replaced by U+FFFD, so that what the tool writes always parses.
#pragma once

#include <string>
#include <string_view>

#include "json.h"
#include "util/json_text.h"

namespace ttrace {

// Strings as the library writes them (src/util/json_text.h, compiled in).
using tdist::append_json_string;
using tdist::valid_utf8;

// Appends v; indent < 0 writes one line, indent >= 0 pretty-prints at that starting depth
// (two spaces a level).
void append_json(std::string& out, const JsonValue& v, int indent = -1);

}  // namespace ttrace
