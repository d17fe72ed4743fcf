// tdist-trace's JSON reader and writer: what parses, and what is refused with line and column.
#include <gtest/gtest.h>

#include <string>

#include "json.h"
#include "json_write.h"

namespace ttrace {
namespace {

// The error parsing text gives, or "" when it parses.
std::string error_of(const std::string& text, const JsonLimits& limits = {}) {
  try {
    parse_json(text, limits);
  } catch (const JsonError& e) {
    return std::to_string(e.line()) + ":" + std::to_string(e.column()) + ": " + e.what();
  }
  return "";
}

TEST(TraceJson, ParsesValues) {
  const JsonValue v = parse_json(
      "\xEF\xBB\xBF{\"a\": [1, -2, 3.5, 1e3, true, false, null],\n \"s\": \"x\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00\","
      " \"big\": 9223372036854775807, \"neg\": -9223372036854775808, \"o\": {}}");
  ASSERT_TRUE(v.is_object());
  const JsonValue* a = v.find("a");
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->items().size(), 7u);
  EXPECT_EQ(a->items()[0].as_int(), 1);
  EXPECT_EQ(a->items()[1].as_int(), -2);
  EXPECT_EQ(a->items()[2].type(), JsonValue::Type::kDouble);
  EXPECT_DOUBLE_EQ(a->items()[2].as_double(), 3.5);
  EXPECT_DOUBLE_EQ(a->items()[3].as_double(), 1000.0);
  EXPECT_TRUE(a->items()[4].as_bool());
  EXPECT_TRUE(a->items()[6].is_null());
  EXPECT_EQ(v.find("s")->as_string(), "x\"\\/\b\f\n\r\t\xC3\xA9\xF0\x9F\x98\x80");
  EXPECT_EQ(v.find("big")->as_int(), INT64_MAX);
  EXPECT_EQ(v.find("neg")->as_int(), INT64_MIN);
  EXPECT_EQ(v.find("s")->line(), 2);
  EXPECT_EQ(v.find("nothing"), nullptr);
}

TEST(TraceJson, TruncatedSaysWhereItStarted) {
  const std::string e = error_of("{\n  \"groups\": [\n    {\"name\": \"default_pg\",\n");
  EXPECT_NE(e.find("the file ends inside an object that starts at line 3 (truncated?)"), std::string::npos) << e;
  EXPECT_EQ(e.rfind("4:", 0), 0u) << e;  // reported at the end: line 4
  EXPECT_NE(error_of("{\"a\": \"unterminated").find("inside a string"), std::string::npos);
  EXPECT_NE(error_of("{\"a\": tru").find("the file ends inside 'true'"), std::string::npos);
  EXPECT_NE(error_of("[1, 2").find("inside an array"), std::string::npos);
  EXPECT_NE(error_of("{\"a\": -").find("truncated"), std::string::npos);
}

TEST(TraceJson, RefusesGarbage) {
  EXPECT_NE(error_of("").find("empty"), std::string::npos);
  EXPECT_NE(error_of("   \n ").find("empty"), std::string::npos);
  EXPECT_EQ(error_of("\x01\x02garbage"), "1:1: unexpected byte 0x01 where a value was expected");
  EXPECT_EQ(error_of("{\"a\": 1} x"), "1:10: unexpected data after the JSON value");
  EXPECT_EQ(error_of("{\"a\" 1}"), "1:6: expected ':' after the member name \"a\"");
  EXPECT_EQ(error_of("{\"a\": 1,}"), "1:9: expected a member name in quotes, found '}'");
  EXPECT_EQ(error_of("[1 2]"), "1:4: expected ',' or ']' in an array, found '2'");
  EXPECT_EQ(error_of("{\"a\": 012}"), "1:10: a number with a leading zero");
  EXPECT_NE(error_of("\"a\nb\"").find("line break inside a string"), std::string::npos);
  EXPECT_NE(error_of("\"a\x01\"").find("control character"), std::string::npos);
  EXPECT_NE(error_of("\"\\x\"").find("bad escape \\x"), std::string::npos);
  EXPECT_NE(error_of("\"\\u12G4\"").find("not a hex digit"), std::string::npos);
  EXPECT_NE(error_of("// comment\n{}").find("unexpected '/'"), std::string::npos);
  EXPECT_NE(error_of("NaN").find("unexpected 'N'"), std::string::npos);
}

TEST(TraceJson, RefusesHugeNumbers) {
  EXPECT_NE(error_of("[9223372036854775808]").find("out of range (beyond 64-bit integers)"), std::string::npos);
  EXPECT_NE(error_of("[-9223372036854775809]").find("out of range"), std::string::npos);
  EXPECT_NE(error_of("[1e400]").find("the number 1e400 is out of range"), std::string::npos);
  EXPECT_NE(error_of("[-1e400]").find("out of range"), std::string::npos);
  EXPECT_NE(error_of("[" + std::string(41, '1') + "]").find("longer than 40 characters"), std::string::npos);
  EXPECT_NE(error_of("[1." + std::string(100, '0') + "]").find("longer than 40 characters"), std::string::npos);
}

TEST(TraceJson, BoundsDepthLengthAndCount) {
  const std::string deep(100000, '[');
  EXPECT_NE(error_of(deep).find("nested deeper than 64 arrays/objects"), std::string::npos);
  EXPECT_EQ(error_of(std::string(64, '[') + std::string(64, ']')), "");
  JsonLimits small;
  small.max_string_bytes = 10;
  small.max_values = 5;
  EXPECT_NE(error_of("\"" + std::string(20, 'a') + "\"", small).find("longer than 10 bytes"), std::string::npos);
  EXPECT_EQ(error_of("[1,2,3,4]", small), "");
  EXPECT_NE(error_of("[1,2,3,4,5]", small).find("more than 5 values"), std::string::npos);
}

TEST(TraceJson, LoneSurrogatesBecomeReplacementCharacters) {
  EXPECT_EQ(parse_json("\"\\ud800x\"").as_string(), "\xEF\xBF\xBDx");
  EXPECT_EQ(parse_json("\"\\udc00\"").as_string(), "\xEF\xBF\xBD");
}

TEST(TraceJson, WriterEscapesAndReplacesInvalidUtf8) {
  JsonValue o = JsonValue::object();
  o.set("s", JsonValue::string("a\"b\\c\n\x1b[31m\xff\xC3\xA9\x01"));
  o.set("n", JsonValue::integer(-5));
  o.set("d", JsonValue::number(0.25));
  JsonValue& a = o.set("a", JsonValue::array());
  a.push(JsonValue::boolean(true));
  a.push(JsonValue());
  std::string out;
  append_json(out, o);
  EXPECT_EQ(out, "{\"s\":\"a\\\"b\\\\c\\n\\u001b[31m\\ufffd\xC3\xA9\\u0001\",\"n\":-5,\"d\":0.25,\"a\":[true,null]}");
  const JsonValue back = parse_json(out);
  EXPECT_EQ(back.find("s")->as_string(), "a\"b\\c\n\x1b[31m\xEF\xBF\xBD\xC3\xA9\x01");
  std::string pretty;
  append_json(pretty, o, 0);
  EXPECT_NE(pretty.find("\n  \"n\": -5"), std::string::npos) << pretty;
  EXPECT_EQ(valid_utf8("\xC0\x80ok\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBDok\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
}

}  // namespace
}  // namespace ttrace
