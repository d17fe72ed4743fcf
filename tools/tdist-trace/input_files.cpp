#include "input_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "records.h"

namespace ttrace {

FileSet FileSet::from_path_prefix(const std::string& path_prefix) {
  const size_t slash = path_prefix.rfind('/');
  if (slash == std::string::npos) return {"", path_prefix};
  return {slash == 0 ? "/" : path_prefix.substr(0, slash), path_prefix.substr(slash + 1)};
}

std::string FileSet::path_of(int rank, const std::string& ext) const {
  const std::string name = prefix + std::to_string(rank) + ext;
  if (dir.empty()) return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

std::string FileSet::pattern(const std::string& ext) const {
  const std::string name = prefix + "<rank>" + ext;
  if (dir.empty()) return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

std::vector<RankFile> find_rank_files(const FileSet& set, const std::string& ext) {
  const std::string dir = set.dir.empty() ? "." : set.dir;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) throw InputError(dir + ": cannot list the folder: " + std::strerror(errno));
  std::vector<RankFile> files;
  while (dirent* ent = readdir(d)) {
    const std::string name = ent->d_name;
    if (name.size() <= set.prefix.size() + ext.size()) continue;
    if (name.compare(0, set.prefix.size(), set.prefix) != 0) continue;
    if (name.compare(name.size() - ext.size(), ext.size(), ext) != 0) continue;
    const std::string digits = name.substr(set.prefix.size(), name.size() - set.prefix.size() - ext.size());
    if (digits.empty() || digits.size() > 8 || (digits.size() > 1 && digits[0] == '0')) continue;
    if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) continue;
    const int rank = std::stoi(digits);
    if (rank >= kMaxRanks) continue;
    files.push_back({rank, set.path_of(rank, ext)});
  }
  closedir(d);
  std::sort(files.begin(), files.end(), [](const RankFile& a, const RankFile& b) { return a.rank < b.rank; });
  return files;
}

std::string read_file_bounded(const std::string& path, size_t max_bytes) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw InputError(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    throw InputError(path + ": not a regular file");
  }
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    close(fd);
    throw InputError(path + ": " + std::to_string(st.st_size >> 20) + " MiB, larger than " +
                     std::to_string(max_bytes >> 20) + " MiB: not a flight recorder dump, or one this tool refuses to read");
  }
  std::string text;
  text.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      close(fd);
      throw InputError(path + ": cannot read: " + std::strerror(err));
    }
    if (n == 0) break;
    if (text.size() + static_cast<size_t>(n) > max_bytes) {
      close(fd);
      throw InputError(path + ": larger than " + std::to_string(max_bytes >> 20) +
                       " MiB: not a flight recorder dump, or one this tool refuses to read");
    }
    text.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return text;
}

}  // namespace ttrace
