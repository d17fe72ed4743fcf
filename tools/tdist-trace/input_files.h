// Finding the per-rank files (<dir>/<prefix><rank><ext>) and reading them with a size bound.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace ttrace {

struct RankFile {
  int rank = 0;
  std::string path;
};

// Where the files are: a folder and a file name prefix.
struct FileSet {
  std::string dir;     // "" is the current folder
  std::string prefix;  // "tdist_fr_"

  // Splits a path prefix ("/tmp/fr/dump_" -> "/tmp/fr", "dump_"), as TORCH_FR_DUMP_TEMP_FILE is.
  static FileSet from_path_prefix(const std::string& path_prefix);
  std::string path_of(int rank, const std::string& ext) const;
  // "DIR/tdist_fr_<rank>.json", for messages.
  std::string pattern(const std::string& ext) const;
};

// Every <prefix><rank><ext> in the folder, by rank (rank: decimal digits, no leading zero).
// Throws InputError when the folder cannot be listed.
std::vector<RankFile> find_rank_files(const FileSet& set, const std::string& ext);

// The whole file, refusing one larger than max_bytes. Throws InputError naming the file.
std::string read_file_bounded(const std::string& path, size_t max_bytes);

inline constexpr size_t kMaxDumpBytes = size_t{256} << 20;

}  // namespace ttrace
