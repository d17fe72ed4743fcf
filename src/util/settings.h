// Every environment variable tdist reads, declared once (settings_table.h):
// its name, type, typed default, range and meaning, and torch's name for the
// same thing where torch has one (read when ours is unset). Readers ask for a
// setting by name and get its typed value:
//
//   const long long slot = settings::get<"TDIST_SHM_SLOT_BYTES">();   // bytes, its default where unset
//   std::optional<std::string> dir = settings::get<"TDIST_TRACE">();   // a path with no default: nullopt
//
// A name that is not in the table does not build, the value's C++ type
// follows from the row, and the text is parsed here only (numbers, ranges,
// bools, choices, lists), with an error that names the variable, the value
// and what is accepted. docs/configuration.md is the table rendered
// (settings_markdown(); a test keeps the two equal).
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "util/settings_table.h"

namespace tdist {

std::span<const SettingInfo> all_settings();
// The entry of `name`, or nullptr.
const SettingInfo* find_setting(std::string_view name);
// docs/configuration.md's table: one Markdown table per group.
std::string settings_markdown();

// `value`, read from the variable `read_as` (the setting's name, or torch's
// where ours is unset), checked by the setting's type and given back in the
// registry's spelling: a bool as "1" or "0" (1/0, true/false, yes/no, on/off in
// any case), a choice in the registry's spelling (any case, or an alias), a
// number as given (within its range), text, paths and lists as given. An
// empty value counts as unset (nullopt), except for a number, where it is an
// error, and a list, which is then empty. Anything else is a DistValueError naming the variable, the value and
// what is accepted: a bad value is never ignored, whichever setting it is.
std::optional<std::string> parse_setting(const SettingInfo& setting, const char* read_as, const std::string& value);

namespace settings {

// A setting's name as a template argument: settings::get<"TDIST_SHM">().
template <std::size_t N>
struct Name {
  char text[N];
  consteval Name(const char (&s)[N]) {
    for (std::size_t i = 0; i < N; ++i) text[i] = s[i];
  }
  constexpr std::string_view view() const { return {text, N - 1}; }
};

// TDIST_DEBUG (TORCH_DISTRIBUTED_DEBUG where unset), in the order of its choices.
enum class Debug { Off, Info, Detail };

namespace detail {

consteval std::size_t index_of(std::string_view name) {
  for (std::size_t i = 0; i < kSettingTable.size(); ++i)
    if (std::string_view(kSettingTable[i].name) == name) return i;
  throw "not a setting: add it to src/util/settings_table.h";  // a compile error where it is asked for
}

// The value a setting of each type reads as.
template <SettingType T>
struct ValueOf;
template <> struct ValueOf<SettingType::Bool> { using type = bool; };
template <> struct ValueOf<SettingType::Int> { using type = long long; };
template <> struct ValueOf<SettingType::Bytes> { using type = long long; };
template <> struct ValueOf<SettingType::Micros> { using type = std::chrono::microseconds; };
template <> struct ValueOf<SettingType::Millis> { using type = std::chrono::milliseconds; };
template <> struct ValueOf<SettingType::Seconds> { using type = std::chrono::seconds; };
template <> struct ValueOf<SettingType::FractionalSeconds> { using type = std::chrono::milliseconds; };
template <> struct ValueOf<SettingType::Choice> { using type = std::string_view; };
template <> struct ValueOf<SettingType::Text> { using type = std::string; };
template <> struct ValueOf<SettingType::Path> { using type = std::string; };
template <> struct ValueOf<SettingType::PathPrefix> { using type = std::string; };
template <> struct ValueOf<SettingType::List> { using type = std::vector<std::string>; };

// The environment's value of setting `index`, parsed (nullopt: unset). Not
// inline: the parsing is in settings.cpp only.
std::optional<bool> read_bool(std::size_t index);
std::optional<long long> read_number(std::size_t index);
std::optional<std::chrono::milliseconds> read_fractional_seconds(std::size_t index);
std::optional<std::string_view> read_choice(std::size_t index);  // the registry's spelling, static storage
std::optional<std::string> read_text(std::size_t index);
std::optional<std::vector<std::string>> read_list(std::size_t index);
std::vector<std::string> split_list(std::string_view text);
std::string text_of(std::size_t index);

template <SettingType T>
std::optional<typename ValueOf<T>::type> read(std::size_t index) {
  using V = typename ValueOf<T>::type;
  if constexpr (T == SettingType::Bool) {
    return read_bool(index);
  } else if constexpr (T == SettingType::Int || T == SettingType::Bytes) {
    return read_number(index);
  } else if constexpr (T == SettingType::Micros || T == SettingType::Millis || T == SettingType::Seconds) {
    auto n = read_number(index);
    return n ? std::optional<V>(V(*n)) : std::nullopt;
  } else if constexpr (T == SettingType::FractionalSeconds) {
    return read_fractional_seconds(index);
  } else if constexpr (T == SettingType::Choice) {
    return read_choice(index);
  } else if constexpr (T == SettingType::List) {
    return read_list(index);
  } else {
    return read_text(index);
  }
}

template <SettingType T>
typename ValueOf<T>::type default_of(const SettingInfo& s) {
  using V = typename ValueOf<T>::type;
  if constexpr (T == SettingType::Bool) {
    return *s.default_number != 0;
  } else if constexpr (T == SettingType::FractionalSeconds) {
    return std::chrono::milliseconds(*s.default_number * 1000);
  } else if constexpr (T == SettingType::List) {
    return split_list(s.default_text);
  } else if constexpr (T == SettingType::Choice || T == SettingType::Text || T == SettingType::Path ||
                       T == SettingType::PathPrefix) {
    return V(s.default_text);
  } else {
    return V(*s.default_number);
  }
}

}  // namespace detail

// The setting `name` as its type reads (bool, long long for counts and bytes,
// std::chrono durations, std::string_view for a choice, std::string for text
// and paths, a vector for a list): its default where it is unset, or, for a
// setting without a default, an optional that is empty where it is unset.
// It reads the environment on every call; a reader on a hot path keeps the
// value where its object is made.
template <Name name>
auto get() {
  constexpr std::size_t index = detail::index_of(name.view());
  constexpr SettingInfo info = kSettingTable[index];
  auto value = detail::read<info.type>(index);
  if constexpr (info.has_default())
    return value ? std::move(*value) : detail::default_of<info.type>(kSettingTable[index]);
  else
    return value;
}

// The setting's text for a message: as set (a bool or choice in the
// registry's spelling), else its default's, else "unset".
template <Name name>
std::string text() {
  return detail::text_of(detail::index_of(name.view()));
}

// The row of `name`, for a check at compile time (a constant elsewhere that must equal its default).
template <Name name>
consteval const SettingInfo& info() {
  return kSettingTable[detail::index_of(name.view())];
}

// TDIST_DEBUG's level: the one reader of it (logging, the debug wrapper and
// get_debug_level() ask here).
Debug debug_level();

}  // namespace settings

}  // namespace tdist
