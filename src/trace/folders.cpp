#include "trace/folders.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "tdist/errors.h"
#include "util/settings.h"

namespace tdist::trace {

namespace {

[[noreturn]] void refuse(const char* setting, const std::string& dir, const std::string& why) {
  throw DistValueError(std::string(setting) + "=" + dir + " cannot be used as a folder: " + why +
                       "; point it at a folder this user can write to, or unset it");
}

// The folder of a path prefix ("/tmp/fr/nccl_trace_rank_" -> "/tmp/fr"); "" when it has none.
std::string folder_of_prefix(const std::string& prefix) {
  const size_t slash = prefix.rfind('/');
  if (slash == std::string::npos) return "";
  return slash == 0 ? "/" : prefix.substr(0, slash);
}

}  // namespace

void ensure_folder(const std::string& dir, const char* setting) {
  if (dir.empty()) return;
  // Each missing component, from the root down, as `mkdir -p` makes them:
  // owner-only, since traces and dumps show what the job computed.
  for (size_t end = dir.find('/', 1); ; end = dir.find('/', end + 1)) {
    const std::string part = end == std::string::npos ? dir : dir.substr(0, end);
    if (!part.empty() && part.back() != '/' && ::mkdir(part.c_str(), 0700) != 0 && errno != EEXIST) {
      const int err = errno;
      // A component we may not create may still exist (EACCES on a parent we cannot write).
      struct stat st {};
      if (::stat(part.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
        refuse(setting, dir, "cannot create " + part + " (" + std::strerror(err) + ")");
    }
    if (end == std::string::npos) break;
  }
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) refuse(setting, dir, std::string("cannot reach it (") + std::strerror(errno) + ")");
  if (!S_ISDIR(st.st_mode)) refuse(setting, dir, "it exists and is not a folder");
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    refuse(setting, dir, "this process (uid " + std::to_string(::getuid()) + ") cannot write to it");
}

void prepare_folders_from_env() {
  if (auto dir = settings::get<"TDIST_TRACE">()) ensure_folder(*dir, "TDIST_TRACE");
  // torch's prefix wins over our folder where both are set (recorder_registry.cpp), so only its folder is used.
  if (auto prefix = settings::get<"TORCH_FR_DUMP_TEMP_FILE">())
    ensure_folder(folder_of_prefix(*prefix), "TORCH_FR_DUMP_TEMP_FILE");
  else if (auto dir = settings::get<"TDIST_FLIGHT_RECORDER_DIR">())
    ensure_folder(*dir, "TDIST_FLIGHT_RECORDER_DIR");
}

std::string default_dump_folder() {
  const std::string base = settings::get<"TMPDIR">();
  const std::string dir = base + "/tdist-flight-recorder-" + std::to_string(::getuid());
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    throw DistError("flight recorder: cannot create the default dump folder " + dir + " (" + std::strerror(errno) +
                    "); set TDIST_FLIGHT_RECORDER_DIR to a folder this user can write to");
  // It sits in a folder others may write to: it must be this user's own,
  // and not a link someone else left there.
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::getuid())
    throw DistError("flight recorder: " + dir +
                    " is not a folder of this user's own (a link, a file, or another user's); remove it, or set "
                    "TDIST_FLIGHT_RECORDER_DIR");
  if ((st.st_mode & 077) != 0 && ::chmod(dir.c_str(), 0700) != 0)
    throw DistError("flight recorder: cannot make " + dir + " owner-only (" + std::strerror(errno) +
                    "); set TDIST_FLIGHT_RECORDER_DIR");
  return dir;
}

}  // namespace tdist::trace
