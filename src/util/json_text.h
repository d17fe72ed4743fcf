// JSON string literals for the files the library writes (error files, flight
// recorder dumps, timelines) and for tdist-trace's output (which compiles this
// file in, and no other of the library's): escaped, and valid UTF-8 whatever
// the text held (a byte that is not part of a valid sequence becomes U+FFFD),
// since readers such as tdist-trace refuse anything else.
#pragma once

#include <string>
#include <string_view>

namespace tdist {

// Appends `text` as a quoted JSON string (U+FFFD written as \ufffd).
void append_json_string(std::string& out, std::string_view text);
// `text` with every byte outside a valid sequence replaced by U+FFFD.
std::string valid_utf8(std::string_view text);
// The length of the valid UTF-8 sequence at text[i] (1 for ASCII; RFC 3629:
// no overlong forms, no surrogates, nothing past U+10FFFF), or 0.
size_t utf8_sequence_length(std::string_view text, size_t i);

}  // namespace tdist
