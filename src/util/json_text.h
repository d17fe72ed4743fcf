// JSON string literals for the files the library writes (error files, flight
// recorder dumps, timelines): escaped, and valid UTF-8 whatever the text held
// (a byte that is not part of a valid sequence becomes U+FFFD), since readers
// such as tdist-trace refuse anything else.
#pragma once

#include <string>
#include <string_view>

namespace tdist {

void append_json_string(std::string& out, std::string_view text);

}  // namespace tdist
