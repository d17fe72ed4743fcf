// The settings registry: every variable tdist reads is in it, it is what
// docs/configuration.md shows, and torch's names stand in for ours.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "common/scoped_env.h"
#include "tdist/errors.h"
#include "util/env.h"
#include "util/settings.h"

namespace tdist::testing {
namespace {

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(Settings, TheDocumentationShowsTheRegistry) {
  const std::string doc = read_file(std::filesystem::path(TDIST_SOURCE_DIR) / "docs/configuration.md");
  const std::string begin = "<!-- settings: begin -->\n", end = "<!-- settings: end -->";
  auto b = doc.find(begin), e = doc.find(end);
  ASSERT_NE(b, std::string::npos) << "docs/configuration.md has no '" << begin << "' marker";
  ASSERT_NE(e, std::string::npos);
  EXPECT_EQ(doc.substr(b + begin.size(), e - b - begin.size()), settings_markdown())
      << "docs/configuration.md is out of date: paste settings_markdown() between the markers";
}

// A name in quotes in the sources that looks like one of ours must be in the
// registry (the readers would refuse it at run time; this finds it at once).
TEST(Settings, EveryVariableTheSourcesNameIsRegistered) {
  const std::regex quoted("\"(TDIST_[A-Z0-9_]+|TORCH_[A-Z0-9_]+|GLOO_[A-Z0-9_]+)\"");
  std::set<std::string> missing;
  int seen = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(std::filesystem::path(TDIST_SOURCE_DIR) / "src")) {
    if (!entry.is_regular_file()) continue;
    const std::string text = read_file(entry.path());
    for (std::sregex_iterator it(text.begin(), text.end(), quoted), stop; it != stop; ++it) {
      const std::string name = (*it)[1];
      ++seen;
      if (name == "TDIST_ALGO_") continue;  // the prefix of TDIST_ALGO_<COLLECTIVE>
      bool known = find_setting(name) != nullptr;
      for (const SettingInfo& s : all_settings())
        if (s.torch_name && name == s.torch_name) known = true;
      if (!known) missing.insert(name + " (" + entry.path().filename().string() + ")");
    }
  }
  EXPECT_GT(seen, 10) << "the scan found almost nothing: wrong source directory?";
  std::string list;
  for (const auto& m : missing) list += " " + m;
  EXPECT_TRUE(missing.empty()) << "not in src/util/settings.cpp:" << list;
}

TEST(Settings, EveryEntryIsDocumented) {
  std::set<std::string> names;
  for (const SettingInfo& s : all_settings()) {
    EXPECT_TRUE(names.insert(s.name).second) << s.name << " is registered twice";
    EXPECT_GT(std::string(s.meaning).size(), 10u) << s.name;
    EXPECT_FALSE(std::string(s.type).empty()) << s.name;
    EXPECT_FALSE(std::string(s.default_value).empty()) << s.name;
  }
}

TEST(Settings, TorchsNameIsReadWhereOursIsUnset) {
  ScopedEnv ours("TDIST_SOCKET_IFNAME", nullptr);
  ScopedEnv theirs("GLOO_SOCKET_IFNAME", "eth7");
  EXPECT_EQ(get_env("TDIST_SOCKET_IFNAME"), "eth7");
  ScopedEnv set("TDIST_SOCKET_IFNAME", "eth3");
  EXPECT_EQ(get_env("TDIST_SOCKET_IFNAME"), "eth3");
  ScopedEnv debug("TORCH_DISTRIBUTED_DEBUG", "DETAIL");
  ScopedEnv no_debug("TDIST_DEBUG", nullptr);
  EXPECT_EQ(get_env("TDIST_DEBUG"), "DETAIL");
}

TEST(Settings, AnUnregisteredNameIsRefused) {
  try {
    get_env("TDIST_NOT_A_SETTING");
    FAIL() << "an unregistered name was read";
  } catch (const DistError& e) {
    EXPECT_NE(std::string(e.what()).find("TDIST_NOT_A_SETTING"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tdist::testing
