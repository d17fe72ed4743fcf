#include "output.h"

#include <poll.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <optional>
#include <string>

namespace tdistrun {

void FdSink::write(std::string_view data) {
  while (!broken_ && !data.empty()) {
    ssize_t n = ::write(fd_, data.data(), data.size());
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      // Someone made our stdout non-blocking (a shared terminal or pipe): wait for room.
      pollfd p{fd_, POLLOUT, 0};
      ::poll(&p, 1, -1);
    } else {
      broken_ = true;
    }
  }
}

LinePrefixer::LinePrefixer(std::string prefix, Emit emit, size_t max_line)
    : prefix_(std::move(prefix)), emit_(std::move(emit)), max_line_(max_line == 0 ? 1 : max_line) {}

void LinePrefixer::append_line(std::string& out, std::string_view line) const {
  out.append(prefix_);
  out.append(line);
  out.push_back('\n');
}

void LinePrefixer::feed(std::string_view data) {
  std::string out;
  while (!data.empty()) {
    size_t nl = data.find('\n');
    size_t seg = nl == std::string_view::npos ? data.size() : nl;
    // Over-long line: emit max_line-byte pieces, keep at most max_line buffered.
    while (partial_.size() + seg > max_line_) {
      size_t take = max_line_ - partial_.size();
      partial_.append(data.substr(0, take));
      append_line(out, partial_);
      partial_.clear();
      data.remove_prefix(take);
      seg -= take;
    }
    if (nl == std::string_view::npos) {
      partial_.append(data);
      break;
    }
    if (partial_.empty()) {
      append_line(out, data.substr(0, seg));
    } else {
      partial_.append(data.substr(0, seg));
      append_line(out, partial_);
      partial_.clear();
    }
    data.remove_prefix(seg + 1);
  }
  if (!out.empty()) emit_(out);
}

void LinePrefixer::finish() {
  if (partial_.empty()) return;
  std::string out;
  append_line(out, partial_);
  partial_.clear();
  emit_(out);
}

std::string render_line_prefix(std::string_view tmpl, const LinePrefixValues& values) {
  auto value_of = [&](std::string_view name) -> std::optional<std::string> {
    if (name == "role_name") return values.role_name;
    if (name == "rank") return std::to_string(values.rank);
    if (name == "local_rank") return std::to_string(values.local_rank);
    if (name == "hostname") return values.hostname;
    return std::nullopt;
  };
  auto identifier_char = [](char c, bool first) {
    return c == '_' || std::isalpha(static_cast<unsigned char>(c)) || (!first && std::isdigit(static_cast<unsigned char>(c)));
  };
  std::string out;
  size_t i = 0;
  while (i < tmpl.size()) {
    const size_t dollar = tmpl.find('$', i);
    out.append(tmpl.substr(i, dollar == std::string_view::npos ? std::string_view::npos : dollar - i));
    if (dollar == std::string_view::npos) break;
    i = dollar + 1;
    if (i < tmpl.size() && tmpl[i] == '$') {
      out.push_back('$');
      ++i;
      continue;
    }
    const bool braced = i < tmpl.size() && tmpl[i] == '{';
    size_t start = braced ? i + 1 : i;
    size_t end = start;
    while (end < tmpl.size() && identifier_char(tmpl[end], end == start)) ++end;
    const bool closed = !braced || (end < tmpl.size() && tmpl[end] == '}');
    auto value = end > start && closed ? value_of(tmpl.substr(start, end - start)) : std::nullopt;
    if (!value) {
      out.push_back('$');  // kept as written
      continue;
    }
    out.append(*value);
    i = braced ? end + 1 : end;
  }
  return out;
}

}  // namespace tdistrun
