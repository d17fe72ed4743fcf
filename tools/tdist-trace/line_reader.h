// Reads a JSON Lines file line by line, each line at most max_line bytes: a longer one is
// reported (and skipped) without being held in memory.
#pragma once

#include <cstdio>
#include <string>

namespace ttrace {

class LineReader {
 public:
  // Throws InputError when the file cannot be opened.
  LineReader(const std::string& path, size_t max_line);
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // The next line (without its '\n') into line; false at the end. too_long is set when the
  // line was longer than max_line (line is then empty). line_number() counts from 1.
  bool next(std::string& line, bool& too_long);
  int line_number() const { return line_number_; }
  // Whether the last line returned had no '\n' (the file ended inside it).
  bool last_unterminated() const { return unterminated_; }

 private:
  std::FILE* file_ = nullptr;
  std::string path_;
  size_t max_line_;
  int line_number_ = 0;
  bool unterminated_ = false;
};

}  // namespace ttrace
