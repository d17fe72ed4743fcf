// What tdist-trace's tests share: a temporary folder removed at the end, running the built
// tool, reading files, and the tool's JSON output parsed.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "json.h"

namespace trace_test {

class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/tdist_trace_test.XXXXXX";
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    if (mkdtemp(buf.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = buf.data();
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

struct ToolResult {
  int exit_code = -1;
  std::string out;
  std::string err;
  std::string all() const { return out + err; }
};

inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs the built tdist-trace with args; its standard output and error go to files in scratch.
inline ToolResult run_tool(const std::vector<std::string>& args) {
  TempDir scratch;
  std::string cmd = shell_quote(TDIST_TRACE_PATH);
  for (const std::string& a : args) cmd += " " + shell_quote(a);
  cmd += " >" + shell_quote(scratch.file("out")) + " 2>" + shell_quote(scratch.file("err")) + " </dev/null";
  const int status = std::system(cmd.c_str());
  ToolResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = read_text(scratch.file("out"));
  r.err = read_text(scratch.file("err"));
  return r;
}

inline ttrace::JsonValue parse(const std::string& text) {
  ttrace::JsonLimits limits;
  limits.max_values = 1u << 24;
  return ttrace::parse_json(text, limits);
}

inline std::vector<int64_t> ints_of(const ttrace::JsonValue* v) {
  std::vector<int64_t> out;
  if (v == nullptr) return out;
  for (const auto& i : v->items()) out.push_back(i.as_int());
  return out;
}

}  // namespace trace_test
