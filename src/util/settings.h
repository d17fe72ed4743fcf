// Every environment variable tdist reads, in one table (settings.cpp): its
// name, type, default and meaning, and torch's name for the same thing where
// torch has one (read when ours is unset). docs/configuration.md is this
// table rendered (settings_markdown(); a test keeps the two equal), and the
// readers in util/env.h refuse a name that is not in it, so nothing can be
// read without being documented.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace tdist {

struct SettingInfo {
  const char* name;           // "TDIST_SHM"
  const char* type;           // "bool", "int", "bytes", "µs", "ms", "s", "text", "path", "list"
  const char* default_value;  // as a user reads it ("1", "512 KiB", "unset")
  const char* torch_name;     // torch's equivalent, read where `name` is unset; nullptr: none
  const char* meaning;        // one or two sentences
  const char* group;          // "launch" (set by the launcher), or the layer that reads it
};

std::span<const SettingInfo> all_settings();
// The entry of `name`, or nullptr.
const SettingInfo* find_setting(std::string_view name);
// docs/configuration.md's table: one Markdown table per group.
std::string settings_markdown();

}  // namespace tdist
