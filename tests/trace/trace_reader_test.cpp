// Reading one flight recorder dump: every field checked, and a refusal names the file, the line
// and the place in the dump.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "dump_reader.h"
#include "synthetic.h"

namespace ttrace {
namespace {

using trace_test::healthy_job;

// The InputError reading text gives, or "" when it reads.
std::string error_of(const std::string& text) {
  try {
    parse_dump("d/tdist_fr_3.json", text);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

std::string healthy_text(int rank = 3) { return healthy_job(8, 4).rank(rank).json(); }

std::string replace(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

TEST(TraceDumpReader, ReadsEveryField) {
  trace_test::SJob job = healthy_job(8, 5);
  trace_test::SEntry& e = *job.rank(3).group().at(2);
  e.out_shapes = {{2, 3}, {}};
  e.error = "boom";
  e.state = "failed";
  const Dump d = parse_dump("x.json", job.rank(3).json());
  EXPECT_EQ(d.info.rank, 3);
  EXPECT_EQ(d.info.world_size, 8);
  EXPECT_EQ(d.info.host, "node0");
  EXPECT_EQ(d.info.clock_offset_us, trace_test::clock_offset(3));
  EXPECT_EQ(d.reason, "request");
  ASSERT_EQ(d.groups.size(), 1u);
  const GroupRecord& g = d.groups[0];
  EXPECT_EQ(g.name, "default_pg");
  EXPECT_EQ(g.ranks, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(g.group_rank, 3);
  EXPECT_EQ(g.capacity, 2000);
  ASSERT_EQ(g.entries.size(), 5u);
  const Entry& x = g.entries[1];
  EXPECT_EQ(x.seq, 2);
  EXPECT_EQ(x.op, "all_reduce");
  EXPECT_EQ(x.dtype, "float32");
  EXPECT_EQ(x.shapes, (std::vector<Shape>{{4096}}));
  EXPECT_EQ(x.out_shapes, (std::vector<Shape>{{2, 3}, {}}));
  EXPECT_EQ(x.bytes, 16384);
  EXPECT_EQ(x.reduce_op, "sum");
  EXPECT_EQ(x.engine, "shm");
  EXPECT_EQ(x.algorithm, "ring");
  EXPECT_EQ(x.state, State::kFailed);
  EXPECT_EQ(x.error, "boom");
  EXPECT_EQ(x.started_us - x.queued_us, 5);
  EXPECT_GT(x.line, 1);
  EXPECT_EQ(g.entries[4].op, "broadcast");
  EXPECT_EQ(g.entries[4].root, 0);
}

TEST(TraceDumpReader, MissingFieldsNameThePlaceAndLine) {
  const std::string text = healthy_text();
  // The third entry loses its "op": line of that entry, its place, the field.
  std::string no_op = text;
  const size_t third = no_op.find("\"seq\": 3");
  ASSERT_NE(third, std::string::npos);
  no_op.replace(no_op.find("\"op\": ", third), 20, "\"opx\": \"all_reduce\",");
  const int line = 1 + static_cast<int>(std::count(no_op.begin(), no_op.begin() + static_cast<long>(third), '\n'));
  EXPECT_EQ(error_of(no_op), "d/tdist_fr_3.json:" + std::to_string(line) + ": groups[0].entries[2]: 'op' is missing");
  EXPECT_EQ(error_of(replace(text, "\"version\": 1,", "")), "d/tdist_fr_3.json:1: the dump: 'version' is missing");
  EXPECT_NE(error_of(replace(text, "\"groups\": [", "\"groupz\": [")).find("the dump: 'groups' is missing"), std::string::npos);
  EXPECT_NE(error_of(replace(text, "\"ranks\": [", "\"rankz\": [")).find("groups[0]: 'ranks' is missing"), std::string::npos);
  EXPECT_NE(error_of(replace(text, "\"state\": \"completed\"", "\"state\": null")).find("'state' is missing"),
            std::string::npos);
}

TEST(TraceDumpReader, WrongTypesAndRanges) {
  const std::string text = healthy_text();
  EXPECT_NE(error_of(replace(text, "\"rank\": 3", "\"rank\": \"3\"")).find("'rank' must be an integer, found a string"),
            std::string::npos);
  EXPECT_NE(error_of(replace(text, "\"rank\": 3", "\"rank\": 3.0")).find("found a fractional number"), std::string::npos);
  EXPECT_NE(error_of(replace(text, "\"rank\": 3", "\"rank\": 9")).find("'rank' 9 is not below 'world_size' 8"),
            std::string::npos);
  EXPECT_NE(error_of(replace(text, "\"seq\": 2,", "\"seq\": 9223372036854775807,")).find("'seq' is 9223372036854775807, outside"),
            std::string::npos);
  EXPECT_NE(error_of(replace(text, "\"seq\": 2,", "\"seq\": 123456789012345678901234567890,")).find("out of range"),
            std::string::npos);
  EXPECT_NE(error_of(replace(text, "\"seq\": 2,", "\"seq\": 1e999,")).find("the number 1e999 is out of range"),
            std::string::npos);
  EXPECT_NE(error_of(replace(text, "\"seq\": 2,", "\"seq\": -2,")).find("'seq' is -2, outside"), std::string::npos);
  EXPECT_NE(error_of(replace(text, "\"version\": 1", "\"version\": 2")).find("'version' is 2; this tdist-trace reads version 1"),
            std::string::npos);
  EXPECT_NE(error_of(replace(text, "\"state\": \"completed\"", "\"state\": \"exploded\"")).find("'state' is \"exploded\""),
            std::string::npos);
  EXPECT_NE(error_of(replace(text, "\"shapes\": [[4096]]", "\"shapes\": [4096]")).find("must be a list of shapes"),
            std::string::npos);
  EXPECT_NE(error_of(replace(text, "\"shapes\": [[4096]]", "\"shapes\": [[-1]]")).find("a size that is not an integer"),
            std::string::npos);
  std::string dims = "1";
  for (int i = 1; i < 33; ++i) dims += ",1";
  EXPECT_NE(error_of(replace(text, "\"shapes\": [[4096]]", "\"shapes\": [[" + dims + "]]")).find("33 dimensions (at most 32)"),
            std::string::npos);
  EXPECT_NE(error_of(replace(text, "\"p2p\": false", "\"p2p\": 0")).find("'p2p' must be true or false"), std::string::npos);
  EXPECT_NE(error_of(replace(text, "\"groups\": [", "\"groups\": {\"a\": 1}, \"groupz\": [")).find("'groups' must be an array, found an object"),
            std::string::npos);
}

TEST(TraceDumpReader, InconsistentGroups) {
  const std::string text = healthy_text();
  EXPECT_NE(error_of(replace(text, "[0,1,2,3,4,5,6,7]", "[0,1,2,3,3,5,6,7]")).find("names rank 3 twice"), std::string::npos);
  EXPECT_NE(error_of(replace(text, "[0,1,2,3,4,5,6,7]", "[0,1,2,4]")).find("does not include this dump's own rank 3"),
            std::string::npos);
  EXPECT_NE(error_of(replace(text, "[0,1,2,3,4,5,6,7]", "[0,1,2,3,8]")).find("not a rank below the world size"),
            std::string::npos);
  EXPECT_NE(error_of(replace(text, "\"seq\": 3,", "\"seq\": 1,")).find("'seq' 1 does not increase"), std::string::npos);
  // Two groups of one name in one dump.
  trace_test::SJob job = healthy_job(4, 2);
  trace_test::SGroup copy = job.rank(3).group();
  job.rank(3).groups.push_back(copy);
  EXPECT_NE(error_of(job.rank(3).json()).find("the group name \"default_pg\" appears twice"), std::string::npos);
}

TEST(TraceDumpReader, UnknownFieldsAndOptionalOnesAreFine) {
  std::string text = replace(healthy_text(), "\"host\": \"node0\",", "\"host\": \"node0\", \"future\": {\"x\": [1]},");
  text = replace(text, "\"dtype\": \"float32\", ", "");
  text = replace(text, "\"engine\": \"shm\", ", "");
  EXPECT_EQ(error_of(text), "");
}

}  // namespace
}  // namespace ttrace
