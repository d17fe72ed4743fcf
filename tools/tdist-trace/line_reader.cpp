#include "line_reader.h"

#include <cerrno>
#include <cstring>

#include "records.h"

namespace ttrace {

LineReader::LineReader(const std::string& path, size_t max_line) : path_(path), max_line_(max_line) {
  file_ = std::fopen(path.c_str(), "rb");
  if (file_ == nullptr) throw InputError(path + ": cannot open: " + std::strerror(errno));
}

LineReader::~LineReader() {
  if (file_ != nullptr) std::fclose(file_);
}

bool LineReader::next(std::string& line, bool& too_long) {
  line.clear();
  too_long = false;
  bool any = false;
  for (;;) {
    const int c = getc_unlocked(file_);
    if (c == EOF) {
      if (std::ferror(file_)) throw InputError(path_ + ": cannot read: " + std::strerror(errno));
      if (!any) return false;
      unterminated_ = true;
      break;
    }
    any = true;
    if (c == '\n') {
      unterminated_ = false;
      break;
    }
    if (too_long) continue;
    if (line.size() >= max_line_) {
      too_long = true;
      line.clear();
      continue;
    }
    line += static_cast<char>(c);
  }
  ++line_number_;
  return true;
}

}  // namespace ttrace
