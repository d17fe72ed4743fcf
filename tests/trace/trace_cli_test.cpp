// tdist-trace's command line, and bad input through it: exit 2 with a message that names the
// file, while the readable dumps are still analysed; hostile text never reaches the terminal raw.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "synthetic.h"
#include "trace_test_util.h"

namespace trace_test {
namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(TraceCli, HelpVersionAndUsage) {
  ToolResult r = run_tool({"--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_TRUE(contains(r.out, "usage: tdist-trace [options] DIR")) << r.out;
  EXPECT_TRUE(contains(r.out, "--timeline")) << r.out;
  r = run_tool({"--version"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_TRUE(contains(r.out, "tdist-trace 0.")) << r.out;
  r = run_tool({});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "which folder?")) << r.err;
  r = run_tool({"--bogus", "x"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "unknown option '--bogus'")) << r.err;
  r = run_tool({"a", "b"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "one folder only")) << r.err;
  r = run_tool({"--slow-ms", "abc", "x"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "--slow-ms wants milliseconds")) << r.err;
  r = run_tool({"x", "-o", "y"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "-o is for --timeline")) << r.err;
  r = run_tool({"/nonexistent/tdist_trace_dir"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "/nonexistent/tdist_trace_dir: cannot list the folder")) << r.err;
}

// A job of 4 healthy dumps with rank 2's replaced by text: exit 2, the file named with line and
// column, and the three others analysed (rank 2 reported as unreadable).
void expect_refused(const std::string& text, const std::string& message) {
  TempDir dir;
  healthy_job(4, 5).write_dumps(dir.path());
  write_file(dir.path(), "tdist_fr_2.json", text);
  const ToolResult r = run_tool({dir.path()});
  EXPECT_EQ(r.exit_code, 2) << r.all();
  EXPECT_TRUE(contains(r.err, "tdist-trace: " + dir.path() + "/tdist_fr_2.json" + message)) << r.err;
  EXPECT_TRUE(contains(r.out, "rank 2's dump cannot be read, so it is left out")) << r.out;
  EXPECT_TRUE(contains(r.out, "3 dumps of 4 ranks")) << r.out;
}

TEST(TraceCli, TruncatedDump) {
  const std::string full = healthy_job(4, 5).rank(2).json();
  expect_refused(full.substr(0, full.size() / 2), ":");
  expect_refused(full.substr(0, full.size() / 2), "");
  TempDir dir;
  write_file(dir.path(), "tdist_fr_0.json", full.substr(0, full.find("\"entries\"") + 20));
  const ToolResult r = run_tool({dir.path()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "(truncated?)")) << r.err;
  EXPECT_TRUE(contains(r.err, "the file ends inside an array that starts at line 13")) << r.err;
}

TEST(TraceCli, GarbageEmptyAndDeepDumps) {
  expect_refused("\x7f" "ELF\x02\x01\x01", ":1:1: unexpected byte 0x7f where a value was expected");
  expect_refused("", ":1:1: empty: no JSON value");
  expect_refused("[1, 2, 3]", ":1: the dump: must be an object, found an array");
  expect_refused(std::string(1000000, '[') + std::string(1000000, ']'), ":1:65: nested deeper than 64 arrays/objects");
  expect_refused("{\"version\": 1, \"rank\": 2, \"groups\": [], \"x\": 1e99999}", ":1:");
  expect_refused("{\"version\": 1, \"rank\": 99999999999999999999999, \"groups\": []}", ":1:24: the number");
  expect_refused("{\"version\": 1, \"rank\": 99999999, \"groups\": []}", ":1: the dump: 'rank' is 99999999, outside 0 .. 1048575");
  expect_refused("{\"version\": 1, \"rank\": 2}", ":1: the dump: 'groups' is missing");
  expect_refused("{\"version\": \"2.4\", \"pg_config\": {}, \"entries\": []}",
                 ":1: the dump: 'version' is the string \"2.4\": a dump of PyTorch's own flight recorder?");
  expect_refused("{\"version\": 1, \"rank\": 1, \"groups\": []}", ": the dump is rank 1's, but its name says rank 2");
}

TEST(TraceCli, OversizeFileIsRefusedWithoutReadingIt) {
  TempDir dir;
  healthy_job(2, 2).write_dumps(dir.path());
  ASSERT_EQ(truncate(dir.file("tdist_fr_1.json").c_str(), off_t{300} << 20), 0);  // sparse
  const ToolResult r = run_tool({dir.path()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "tdist_fr_1.json: 300 MiB, larger than 256 MiB")) << r.err;
}

TEST(TraceCli, HostileTextNeverReachesTheTerminalRaw) {
  SJob job = healthy_job(4, 5);
  make_failure(job, 5, "\x1b]0;pwned\x07\x1b[2J" + std::string(5000, 'E') + "\xff");
  job.rank(1).group().at(5)->op = "broadcast\x1b[31m";
  TempDir dir;
  job.write_dumps(dir.path());
  const ToolResult r = run_tool({dir.path()});
  EXPECT_EQ(r.exit_code, 1) << r.all();
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find('\x07'), std::string::npos);
  EXPECT_TRUE(contains(r.out, "?]0;pwned??[2J")) << r.out;
  EXPECT_LT(r.out.size(), 6000u) << "long errors are cut for the terminal";
  const ToolResult j = run_tool({"--json", dir.path()});
  const ttrace::JsonValue report = parse(j.out);  // valid JSON, with the full text
  EXPECT_TRUE(contains(j.out, "\\u001b]0;pwned\\u0007")) << j.out.substr(0, 2000);
  EXPECT_GT(j.out.size(), 5000u);
}

TEST(TraceCli, HostileStepTextIsEscaped) {
  SJob job = healthy_job(2, 2);
  SStep step;
  step.step = "among hosts\x1b]0;pwned\x07";
  step.error = "\xff\x1b[2J";
  step.state = "failed";
  step.started_us = step.ended_us = job.rank(1).group().entries[0].started_us;
  job.rank(1).steps.push_back(step);
  step.state = "\x1b[31mstarted";
  job.rank(1).steps.push_back(step);
  TempDir dir;
  job.write_traces(dir.path());
  const ToolResult r = run_tool({"--timeline", dir.path(), "-o", dir.file("t.json")});
  EXPECT_EQ(r.exit_code, 0) << r.all();
  EXPECT_EQ(r.all().find('\x1b'), std::string::npos) << r.all();
  EXPECT_TRUE(contains(r.err, "'state' is \"?[31mstarted\", not completed or failed")) << r.err;
  const std::string text = read_text(dir.file("t.json"));
  EXPECT_EQ(text.find('\x1b'), std::string::npos);
  EXPECT_TRUE(contains(text, "\"reduce, among hosts\\u001b]0;pwned\\u0007 (failed)\"")) << text;
  EXPECT_TRUE(contains(text, "\"error\":\"\\ufffd\\u001b[2J\"")) << text;
}

TEST(TraceCli, ExtremeTimesAndOffsetsDoNotOverflow) {
  // Times at the largest allowed value, clock offsets at both ends: read and compared without
  // overflow (the sanitized build aborts on one); a bigger offset is refused.
  SJob job = healthy_job(3, 6);
  const int64_t max_time = int64_t{1} << 62, max_offset = int64_t{1} << 60;
  job.rank(1).clock_offset_us = -max_offset;
  job.rank(2).clock_offset_us = max_offset;
  for (SEntry& e : job.rank(1).group().entries) e.queued_us = e.started_us = e.ended_us = max_time;
  job.rank(1).dump_time_us = max_time;
  // Steps at both ends of the allowed times (in the timeline files only).
  SStep step;
  step.seq = (int64_t{1} << 20) - 1;
  step.part = step.bytes = step.thread = max_time;
  step.started_us = step.ended_us = max_time;
  job.rank(1).steps.push_back(step);
  step.started_us = 1;
  job.rank(2).steps.push_back(step);
  job.rank(2).group().entries.back().state = "started";
  TempDir dir;
  job.write_dumps(dir.path());
  job.write_traces(dir.path());
  ToolResult r = run_tool({dir.path()});
  EXPECT_EQ(r.exit_code, 1) << r.all();
  r = run_tool({"--timeline", dir.path(), "-o", dir.file("t.json"), "--queued"});
  EXPECT_EQ(r.exit_code, 0) << r.all();
  EXPECT_TRUE(contains(r.out, "and 2 steps")) << r.out;
  EXPECT_NO_THROW(parse(read_text(dir.file("t.json"))));
  job.rank(2).clock_offset_us = max_offset + 1;
  job.write_dumps(dir.path());
  r = run_tool({dir.path()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "'clock_offset_us' is 1152921504606846977, outside")) << r.err;
}

TEST(TraceCli, EmptyFolderAndNonDumpFilesAreIgnored) {
  TempDir dir;
  write_file(dir.path(), "tdist_fr_x.json", "{}");
  write_file(dir.path(), "tdist_fr_01.json", "{}");
  write_file(dir.path(), "tdist_fr_1.json.tmp", "{}");
  const ToolResult r = run_tool({dir.path()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "no flight recorder dumps")) << r.err;
}

}  // namespace
}  // namespace trace_test
