// The digits data set (UCI "Optical Recognition of Handwritten Digits", the
// copy scikit-learn ships as sklearn/datasets/data/digits.csv.gz; Debian's
// python3-sklearn installs it): 1797 images of 8x8 pixels with values 0..16,
// one per line as 64 comma-separated pixels followed by the label 0..9.
#pragma once

#include <zlib.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

namespace digits {

inline constexpr int kPixels = 64;
inline constexpr int kClasses = 10;

struct DataSet {
  std::vector<float> images;  // rows x kPixels, scaled to [0, 1]
  std::vector<int> labels;    // rows
  size_t size() const { return labels.size(); }
  const float* image(size_t i) const { return images.data() + i * kPixels; }
};

// Where the file may be, in the order they are tried: `explicit_path` (a
// command-line argument), $TDIST_DIGITS_CSV, the path found when tdist was
// configured, then where python3-sklearn (Debian) or pip put scikit-learn.
inline std::vector<std::string> candidate_paths(const std::string& explicit_path = {}) {
  std::vector<std::string> paths;
  if (!explicit_path.empty()) return {explicit_path};
  if (const char* env = std::getenv("TDIST_DIGITS_CSV"); env != nullptr && *env != '\0') return {env};
#ifdef TDIST_DIGITS_CSV_DEFAULT
  paths.push_back(TDIST_DIGITS_CSV_DEFAULT);
#endif
  const std::string rel = "sklearn/datasets/data/digits.csv.gz";
  paths.push_back("/usr/lib/python3/dist-packages/" + rel);
  for (const char* lib : {"/usr/local/lib", "/usr/lib"}) {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(lib, ec)) {
      std::string name = entry.path().filename().string();
      if (name.rfind("python3", 0) != 0) continue;
      for (const char* site : {"dist-packages", "site-packages"}) {
        paths.push_back(entry.path().string() + "/" + site + "/" + rel);
      }
    }
  }
  return paths;
}

// The first existing candidate; std::runtime_error listing them when none is there.
inline std::string locate(const std::string& explicit_path = {}) {
  std::vector<std::string> paths = candidate_paths(explicit_path);
  for (const auto& p : paths) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(p, ec)) return p;
  }
  std::string msg = "the digits data set (digits.csv.gz) was not found; looked at:";
  for (const auto& p : paths) msg += "\n  " + p;
  msg +=
      "\ninstall it with `apt-get install python3-sklearn` (Debian/Ubuntu) or `pip install scikit-learn`, "
      "or name the file with TDIST_DIGITS_CSV=/path/to/digits.csv.gz or --data /path/to/digits.csv.gz";
  throw std::runtime_error(msg);
}

// Reads the (gzip-compressed or plain) CSV file; std::runtime_error naming the
// file and line on anything malformed.
inline DataSet load(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) {
    throw std::runtime_error("cannot open " + path + ": " + std::strerror(errno));
  }
  DataSet data;
  char line[4096];
  size_t lineno = 0;
  auto fail = [&](const std::string& why) {
    gzclose(f);
    throw std::runtime_error(path + ":" + std::to_string(lineno) + ": " + why);
  };
  while (gzgets(f, line, sizeof line) != nullptr) {
    ++lineno;
    if (std::strchr(line, '\n') == nullptr && !gzeof(f)) fail("line too long");
    const char* p = line;
    while (*p == ' ' || *p == '\t') ++p;
    if (*p == '\n' || *p == '\r' || *p == '\0') continue;  // blank line
    long values[kPixels + 1];
    for (int k = 0; k <= kPixels; ++k) {
      char* end = nullptr;
      values[k] = std::strtol(p, &end, 10);
      if (end == p) fail("expected " + std::to_string(kPixels + 1) + " integers, found " + std::to_string(k));
      p = end;
      if (k < kPixels) {
        if (*p != ',') fail("expected ',' after field " + std::to_string(k + 1));
        ++p;
      }
    }
    while (*p == ' ' || *p == '\r' || *p == '\n') ++p;
    if (*p != '\0') fail("more than " + std::to_string(kPixels + 1) + " fields");
    for (int k = 0; k < kPixels; ++k) {
      if (values[k] < 0 || values[k] > 16) fail("pixel value " + std::to_string(values[k]) + " outside 0..16");
      data.images.push_back(float(values[k]) / 16.0f);
    }
    if (values[kPixels] < 0 || values[kPixels] >= kClasses) fail("label " + std::to_string(values[kPixels]) + " outside 0..9");
    data.labels.push_back(int(values[kPixels]));
  }
  int err = 0;
  const char* msg = gzerror(f, &err);
  if (err != Z_OK && err != Z_STREAM_END) fail(std::string("read error: ") + msg);
  gzclose(f);
  if (data.size() == 0) throw std::runtime_error(path + ": no data");
  return data;
}

}  // namespace digits
