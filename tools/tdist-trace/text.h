// Words for people: rank lists, durations, shapes, and input text made safe for a terminal.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "records.h"

namespace ttrace {

// s as valid UTF-8 without control characters (each becomes '?'), cut to max_bytes with "...".
std::string printable(std::string_view s, size_t max_bytes = 300);

// "0-4,6,7": runs of three or more as a range.
std::string rank_list(std::vector<int> ranks);
// "rank 5" or "ranks 0-4,6,7".
std::string ranks_phrase(const std::vector<int>& ranks);
// s with its first letter upper case (to start a sentence).
std::string capitalized(std::string s);

// "850 us", "1.20 ms", "30.0 s", "2.5 min".
std::string duration_text(int64_t us);

// "[4096]", "[2,3],[4]"; "[]" for a tensor of no dimensions; "none" when there is no tensor.
std::string shapes_text(const std::vector<Shape>& shapes);

// "all_reduce #13" (p2p: "send #4 (p2p)").
std::string op_label(const Entry& e);

}  // namespace ttrace
