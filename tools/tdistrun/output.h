// Forwarding worker output: whole lines, each with the worker's "[rankN]: "
// prefix, written to the launcher's stdout or stderr.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace tdistrun {

// Writes everything to a file descriptor (retrying short writes, EINTR and
// EAGAIN). After a hard error (EPIPE: the reader went away) further output is
// dropped, so the launcher keeps supervising its workers.
class FdSink {
 public:
  explicit FdSink(int fd) : fd_(fd) {}
  void write(std::string_view data);
  bool broken() const { return broken_; }

 private:
  int fd_;
  bool broken_ = false;
};

// Splits a byte stream into lines and emits each complete line with a prefix.
// A partial line waits for the rest; finish() emits it (with a newline added).
// A line longer than max_line is emitted in pieces of max_line bytes, each
// prefixed, so one runaway writer cannot grow the buffer without bound.
class LinePrefixer {
 public:
  using Emit = std::function<void(std::string_view)>;
  static constexpr size_t kDefaultMaxLine = 256 * 1024;

  LinePrefixer(std::string prefix, Emit emit, size_t max_line = kDefaultMaxLine);
  // Emits every complete line in data (one emit call per feed, at most).
  void feed(std::string_view data);
  // End of stream: emits the buffered partial line, if any.
  void finish();
  size_t pending() const { return partial_.size(); }

 private:
  void append_line(std::string& out, std::string_view line) const;

  std::string prefix_;
  Emit emit_;
  size_t max_line_;
  std::string partial_;
};

// A worker's line prefix from torchrun's --log-line-prefix-template:
// ${role_name}, ${rank}, ${local_rank} and ${hostname} (or $name) replaced,
// "$$" read as "$", anything else kept as written (Python's
// string.Template.safe_substitute, as torchrun renders it).
struct LinePrefixValues {
  std::string role_name;
  long long rank = 0;
  int local_rank = 0;
  std::string hostname;
};
std::string render_line_prefix(std::string_view tmpl, const LinePrefixValues& values);

}  // namespace tdistrun
