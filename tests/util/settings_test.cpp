// The settings registry: every variable tdist reads is in it, it is what
// docs/configuration.md shows, and torch's names stand in for ours.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "common/scoped_env.h"
#include "tdist/distributed.h"
#include "tdist/errors.h"
#include "tdist/store.h"
#include "util/env.h"
#include "util/logging.h"
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
  EXPECT_TRUE(missing.empty()) << "not in src/util/settings_table.h:" << list;
}

TEST(Settings, EveryEntryIsDocumented) {
  std::set<std::string> names;
  for (const SettingInfo& s : all_settings()) {
    EXPECT_TRUE(names.insert(s.name).second) << s.name << " is registered twice";
    EXPECT_GT(std::string(s.meaning).size(), 10u) << s.name;
    EXPECT_FALSE(std::string(s.group).empty()) << s.name;
  }
}

bool takes_a_number(SettingType t) {
  return t == SettingType::Bool || t == SettingType::Int || t == SettingType::Bytes || t == SettingType::Micros ||
         t == SettingType::Millis || t == SettingType::Seconds || t == SettingType::FractionalSeconds;
}

// A default is of its setting's type and within its range: the registry's
// own parser takes its text back unchanged.
TEST(Settings, EveryDefaultIsOfItsTypeAndInItsRange) {
  for (const SettingInfo& s : all_settings()) {
    EXPECT_FALSE(s.default_number && s.default_text) << s.name << " has two defaults";
    EXPECT_LE(s.min, s.max) << s.name;
    if (s.type == SettingType::Choice) {
      ASSERT_NE(s.choices, nullptr) << s.name << " is a choice without choices";
      ASSERT_NE(s.default_text, nullptr) << s.name << ": a choice needs its default";
      EXPECT_EQ(parse_setting(s, s.name, s.default_text), s.default_text) << s.name;
    } else if (takes_a_number(s.type)) {
      EXPECT_EQ(s.default_text, nullptr) << s.name << ": a number's default is a number";
      if (s.type == SettingType::Bool && s.default_number) EXPECT_TRUE(*s.default_number == 0 || *s.default_number == 1) << s.name;
      if (s.default_number) EXPECT_NO_THROW(parse_setting(s, s.name, std::to_string(*s.default_number))) << s.name;
    } else {
      EXPECT_FALSE(s.default_number) << s.name << ": text has a text default";
    }
    if (s.type != SettingType::Choice) EXPECT_EQ(s.choices, nullptr) << s.name;
  }
}

TEST(Settings, TheDocumentationShowsTypedDefaultsAndRanges) {
  const std::string doc = settings_markdown();
  for (const char* row : {"| `TDIST_SHM_RING_BYTES` | bytes, from 4 KiB to 1 GiB | 512 KiB |",
                          "| `TDIST_SOCKETS_PER_PEER` | int, from 1 to 16 | 1 |",
                          "| `TDIST_STORE_IDLE_TIMEOUT_S` | s, at least 0 | 0 (never) |",
                          "| `TDIST_TIMEOUT` | seconds (fractions allowed) | 1800 (30 minutes, torch's) |",
                          "| `TDIST_DEBUG` | OFF, INFO, DETAIL | OFF | `TORCH_DISTRIBUTED_DEBUG` |",
                          "| `TDIST_JOB_TOKEN` | text | unset (open, with a warning) |"})
    EXPECT_NE(doc.find(row), std::string::npos) << "no '" << row << "' in settings_markdown()";
}

TEST(Settings, ReadersGetTypedValuesAndTheDefaultWhereUnset) {
  ScopedEnv slot("TDIST_SHM_SLOT_BYTES", nullptr), spin("TDIST_SPIN_US", nullptr), shm("TDIST_SHM", nullptr);
  EXPECT_EQ(settings::get<"TDIST_SHM_SLOT_BYTES">(), 512 * 1024);
  EXPECT_EQ(settings::get<"TDIST_SPIN_US">(), std::chrono::microseconds(250));
  EXPECT_TRUE(settings::get<"TDIST_SHM">());
  ScopedEnv slot_set("TDIST_SHM_SLOT_BYTES", "+4096"), spin_set("TDIST_SPIN_US", "7"), shm_off("TDIST_SHM", "off");
  EXPECT_EQ(settings::get<"TDIST_SHM_SLOT_BYTES">(), 4096);
  EXPECT_EQ(settings::get<"TDIST_SPIN_US">(), std::chrono::microseconds(7));
  EXPECT_FALSE(settings::get<"TDIST_SHM">());
  ScopedEnv handshake("TDIST_STORE_HANDSHAKE_MS", "20"), idle("TDIST_STORE_IDLE_TIMEOUT_S", "3");
  EXPECT_EQ(settings::get<"TDIST_STORE_HANDSHAKE_MS">(), std::chrono::milliseconds(20));
  EXPECT_EQ(settings::get<"TDIST_STORE_IDLE_TIMEOUT_S">(), std::chrono::seconds(3));
  ScopedEnv timeout("TDIST_TIMEOUT", "0.25");
  EXPECT_EQ(settings::get<"TDIST_TIMEOUT">(), std::chrono::milliseconds(250));
  ScopedEnv no_timeout("TDIST_TIMEOUT", nullptr);
  EXPECT_EQ(settings::get<"TDIST_TIMEOUT">(), std::chrono::milliseconds(1800 * 1000));
}

TEST(Settings, ASettingWithoutADefaultIsEmptyWhereUnsetOrEmpty) {
  ScopedEnv unset("TDIST_TCP_SLICE_BYTES", nullptr), trace("TDIST_TRACE", "");
  EXPECT_EQ(settings::get<"TDIST_TCP_SLICE_BYTES">(), std::nullopt);
  EXPECT_EQ(settings::get<"TDIST_TRACE">(), std::nullopt);
  ScopedEnv set("TDIST_TCP_SLICE_BYTES", "0"), dir("TDIST_TRACE", "/tmp/x");
  EXPECT_EQ(settings::get<"TDIST_TCP_SLICE_BYTES">(), 0);
  EXPECT_EQ(settings::get<"TDIST_TRACE">(), "/tmp/x");
}

TEST(Settings, ListsAreSplitAtCommasWithoutBlanksOrEmptyItems) {
  ScopedEnv none("TDIST_TRANSPORTS", nullptr);
  EXPECT_EQ(settings::get<"TDIST_TRANSPORTS">(), (std::vector<std::string>{"shm", "tcp"}));
  ScopedEnv listed("TDIST_TRANSPORTS", " tcp ,, shm");
  EXPECT_EQ(settings::get<"TDIST_TRANSPORTS">(), (std::vector<std::string>{"tcp", "shm"}));
  EXPECT_EQ(settings::text<"TDIST_TRANSPORTS">(), " tcp ,, shm");
  ScopedEnv ours("TDIST_SOCKET_IFNAME", nullptr), theirs("GLOO_SOCKET_IFNAME", "eth0,eth1");
  EXPECT_EQ(settings::get<"TDIST_SOCKET_IFNAME">(), (std::vector<std::string>{"eth0", "eth1"}));
  ScopedEnv empty("TDIST_TRANSPORTS", "");  // set, and lists nothing: its reader says so
  EXPECT_EQ(settings::get<"TDIST_TRANSPORTS">(), std::vector<std::string>{});
  EXPECT_EQ(settings::text<"TDIST_TRANSPORTS">(), "");
}

TEST(Settings, TheDebugLevelIsOneChoiceReadOnce) {
  ScopedEnv ours("TDIST_DEBUG", nullptr), theirs("TORCH_DISTRIBUTED_DEBUG", nullptr);
  EXPECT_EQ(settings::debug_level(), settings::Debug::Off);
  EXPECT_EQ(get_debug_level(), DebugLevel::OFF);
  ScopedEnv torch("TORCH_DISTRIBUTED_DEBUG", "info");
  EXPECT_EQ(settings::debug_level(), settings::Debug::Info);
  EXPECT_EQ(get_debug_level(), DebugLevel::INFO);
  ScopedEnv detail("TDIST_DEBUG", "Detail");
  EXPECT_EQ(settings::debug_level(), settings::Debug::Detail);
  EXPECT_EQ(get_debug_level(), DebugLevel::DETAIL);
  ScopedEnv bad("TDIST_DEBUG", "loud");
  EXPECT_THROW(get_debug_level(), DistValueError);
}

TEST(Settings, ANumberPastItsRangeIsRefusedNamingTheRange) {
  ScopedEnv sockets("TDIST_SOCKETS_PER_PEER", "17");
  try {
    settings::get<"TDIST_SOCKETS_PER_PEER">();
    ADD_FAILURE() << "17 sockets per peer were taken";
  } catch (const DistValueError& e) {
    for (const char* w : {"TDIST_SOCKETS_PER_PEER='17'", "from 1 to 16"})
      EXPECT_NE(std::string(e.what()).find(w), std::string::npos) << e.what();
  }
  ScopedEnv ring("TDIST_SHM_RING_BYTES", "2048");
  EXPECT_THROW(settings::get<"TDIST_SHM_RING_BYTES">(), DistValueError);
  ScopedEnv port("MASTER_PORT", "65536");
  EXPECT_THROW(settings::get<"MASTER_PORT">(), DistValueError);
  ScopedEnv huge("TDIST_SPIN_US", "99999999999999999999");  // past 64 bits
  EXPECT_THROW(settings::get<"TDIST_SPIN_US">(), DistValueError);
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

// The message of the DistValueError that reading `name` gives, or "" where it gives none.
std::string refusal(const char* name) {
  try {
    get_env(name);
  } catch (const DistValueError& e) {
    return e.what();
  }
  return "";
}

void expect_mentions(const std::string& message, std::initializer_list<const char*> words) {
  for (const char* w : words) EXPECT_NE(message.find(w), std::string::npos) << "no '" << w << "' in: " << message;
}

TEST(Settings, ABadLogLevelIsAnErrorNamingTheVariableTheValueAndTheChoices) {
  ScopedEnv level("TDIST_LOG_LEVEL", "loud");
  expect_mentions(refusal("TDIST_LOG_LEVEL"), {"TDIST_LOG_LEVEL", "'loud'", "ERROR, WARN, INFO, DEBUG"});
}

TEST(Settings, ABadDebugLevelIsAnErrorNamingTheVariableTheValueAndTheChoices) {
  ScopedEnv debug("TDIST_DEBUG", "verbose");
  expect_mentions(refusal("TDIST_DEBUG"), {"TDIST_DEBUG", "'verbose'", "OFF, INFO, DETAIL"});
}

TEST(Settings, TorchsNamesFollowTheSameRuleAndTheErrorNamesThem) {
  ScopedEnv ours("TDIST_LOG_LEVEL", nullptr), no_debug("TDIST_DEBUG", nullptr);
  ScopedEnv level("TORCH_CPP_LOG_LEVEL", "loud"), debug("TORCH_DISTRIBUTED_DEBUG", "verbose");
  expect_mentions(refusal("TDIST_LOG_LEVEL"), {"TORCH_CPP_LOG_LEVEL='loud'", "TDIST_LOG_LEVEL is unset"});
  expect_mentions(refusal("TDIST_DEBUG"), {"TORCH_DISTRIBUTED_DEBUG='verbose'", "TDIST_DEBUG is unset"});
}

TEST(Settings, ChoicesTakeAnyCaseAndTheirAliasesAndComeBackInTheRegistrysSpelling) {
  ScopedEnv level("TDIST_LOG_LEVEL", "warning");
  EXPECT_EQ(get_env("TDIST_LOG_LEVEL"), "WARN");
  ScopedEnv fatal("TDIST_LOG_LEVEL", "FATAL");
  EXPECT_EQ(get_env("TDIST_LOG_LEVEL"), "ERROR");
  ScopedEnv torchs("TDIST_LOG_LEVEL", nullptr), number("TORCH_CPP_LOG_LEVEL", "0");  // torch's INFO
  EXPECT_EQ(get_env("TDIST_LOG_LEVEL"), "INFO");
  ScopedEnv debug("TDIST_DEBUG", "detail");
  EXPECT_EQ(get_env("TDIST_DEBUG"), "DETAIL");
  ScopedEnv empty("TDIST_DEBUG", "");
  EXPECT_EQ(get_env("TDIST_DEBUG"), std::nullopt);
}

TEST(Settings, BoolsComeBackAsOneOrZeroAndAnythingElseIsRefused) {
  ScopedEnv shm("TDIST_SHM", "false");
  EXPECT_EQ(get_env("TDIST_SHM"), "0");  // its reader tests != "0": "false" used to mean on
  ScopedEnv on("TDIST_SHM", "Yes");
  EXPECT_EQ(get_env("TDIST_SHM"), "1");
  ScopedEnv bad("TDIST_SHM", "nope");
  expect_mentions(refusal("TDIST_SHM"), {"TDIST_SHM='nope'", "1 or 0"});
  EXPECT_THROW(settings::get<"TDIST_SHM">(), DistValueError);
}

TEST(Settings, NumbersMustBeWholeNumbers) {
  ScopedEnv spin("TDIST_SPIN_US", "fast");  // its reader used std::stoll: std::invalid_argument, no name
  expect_mentions(refusal("TDIST_SPIN_US"), {"TDIST_SPIN_US='fast'", "a whole number of microseconds"});
  ScopedEnv ring("TDIST_SHM_RING_BYTES", "4k");
  expect_mentions(refusal("TDIST_SHM_RING_BYTES"), {"TDIST_SHM_RING_BYTES='4k'", "a whole number of bytes"});
  // Where a reader would take a smaller value silently, the registry's least one counts.
  ScopedEnv slot("TDIST_SHM_SLOT_BYTES", "0");  // was the default, without a word
  expect_mentions(refusal("TDIST_SHM_SLOT_BYTES"), {"TDIST_SHM_SLOT_BYTES='0'", "of bytes, at least 1"});
  ScopedEnv segment("TDIST_ALGO_SEGMENT_BYTES", "-5");  // was 2^64 - 5 bytes
  expect_mentions(refusal("TDIST_ALGO_SEGMENT_BYTES"), {"'-5'", "at least 1"});
  ScopedEnv fine("TDIST_SHM_RING_BYTES", "65536");
  EXPECT_EQ(get_env("TDIST_SHM_RING_BYTES"), "65536");
}

// Every setting follows its type's rule: one that is not free text refuses a
// value of no type, naming itself, and every type is one the parser knows.
TEST(Settings, EverySettingRefusesABadValueOfItsType) {
  for (const SettingInfo& s : all_settings()) {
    if (s.type == SettingType::Text || s.type == SettingType::Path || s.type == SettingType::PathPrefix ||
        s.type == SettingType::List) {
      EXPECT_EQ(parse_setting(s, s.name, "#?"), "#?") << s.name;
      continue;
    }
    try {
      parse_setting(s, s.name, "#?");
      ADD_FAILURE() << s.name << " took '#?'";
    } catch (const DistValueError& e) {
      expect_mentions(e.what(), {s.name, "'#?'", "expected"});
    }
  }
}

// A decimal number of seconds takes fractions, and refuses what is not a positive number.
TEST(Settings, SecondsTakeFractionsAndRefuseWhatIsNotAPositiveNumber) {
  const SettingInfo* timeout = find_setting("TDIST_TIMEOUT");
  ASSERT_NE(timeout, nullptr);
  EXPECT_EQ(parse_setting(*timeout, timeout->name, "0.5"), "0.5");
  EXPECT_EQ(parse_setting(*timeout, timeout->name, "60"), "60");
  for (const char* bad : {"", "0", "-1", "1e999", "nan", "5s", " 5"})
    EXPECT_THROW(parse_setting(*timeout, timeout->name, bad), DistValueError) << "'" << bad << "'";
}

TEST(Settings, InitProcessGroupRaisesABadSettingBeforeItConnects) {
  for (const auto& [name, value] : {std::pair{"TDIST_LOG_LEVEL", "loud"}, std::pair{"TDIST_DEBUG", "verbose"}}) {
    ScopedEnv bad(name, value);
    InitOptions o;
    o.store = std::make_shared<HashStore>();
    o.world_size = 1;
    o.rank = 0;
    try {
      init_process_group(o);
      destroy_process_group();
      ADD_FAILURE() << name << "=" << value << " was accepted";
    } catch (const DistValueError& e) {
      expect_mentions(e.what(), {name, value});
    }
  }
}

// A log line may be the first reader (no init_process_group): it cannot throw
// there, so it says the error once on stderr and logs at the default level.
TEST(Settings, ALogLineThatReadsABadLevelFirstSaysSoOnStderr) {
  ScopedEnv bad("TDIST_LOG_LEVEL", "loud");
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(log_level(), LogLevel::Warn);
  EXPECT_EQ(log_level(), LogLevel::Warn);
  const std::string err = ::testing::internal::GetCapturedStderr();
  expect_mentions(err, {"TDIST_LOG_LEVEL='loud'", "ERROR, WARN, INFO, DEBUG"});
  EXPECT_EQ(err.find("is not valid"), err.rfind("is not valid")) << "said more than once: " << err;
}

}  // namespace
}  // namespace tdist::testing
