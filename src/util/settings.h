// Every environment variable tdist reads, in one table (settings.cpp): its
// name, type, default and meaning, and torch's name for the same thing where
// torch has one (read when ours is unset). docs/configuration.md is this
// table rendered (settings_markdown(); a test keeps the two equal), and the
// readers in util/env.h refuse a name that is not in it, so nothing can be
// read without being documented.
#pragma once

#include <climits>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace tdist {

struct SettingInfo {
  const char* name;           // "TDIST_SHM"
  const char* type;           // "bool", "int", "bytes", "µs", "ms", "s", "seconds" (fractions allowed), "text", "path", "list"
  const char* default_value;  // as a user reads it ("1", "512 KiB", "unset")
  const char* torch_name;     // torch's equivalent, read where `name` is unset; nullptr: none
  const char* meaning;        // one or two sentences
  const char* group;          // "launch" (set by the launcher), or the layer that reads it
  // A choice's other spellings, each to the one it stands for ("WARNING=WARN,FATAL=ERROR").
  const char* aliases = nullptr;
  // The least value a number may take, where its reader would otherwise take
  // a smaller one silently (a negative spin, a slot of 0 bytes).
  long long min = LLONG_MIN;
};

std::span<const SettingInfo> all_settings();
// The entry of `name`, or nullptr.
const SettingInfo* find_setting(std::string_view name);
// docs/configuration.md's table: one Markdown table per group.
std::string settings_markdown();

// `value`, read from the variable `read_as` (the setting's name, or torch's
// where ours is unset), as the setting's readers take it, by its type: a bool
// as "1" or "0" (1/0, true/false, yes/no, on/off in any case), a choice
// ("OFF, INFO, DETAIL") in the registry's spelling (any case, or an alias), a
// number ("int", "bytes", "µs", "ms", "s", at least its min; "seconds", positive, fractions
// allowed) as given; text, paths and lists as
// given. An empty bool or choice counts as unset (nullopt). Anything else is a
// DistValueError naming the variable, the value and what is accepted: a bad
// value is never ignored, whichever setting it is.
std::optional<std::string> parse_setting(const SettingInfo& setting, const char* read_as, const std::string& value);

}  // namespace tdist
