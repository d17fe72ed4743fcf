#include "log_files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "util/settings.h"

namespace tdistrun {
namespace {

void make_dir(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) throw std::runtime_error("cannot create the log directory " + path + ": " + ec.message());
}

bool any_redirect(const StdChoice& c) {
  if (c.all != 0) return true;
  for (const auto& [rank, v] : c.per_rank) {
    if (v != 0) return true;
  }
  return false;
}

}  // namespace

LogLayout::LogLayout(const Options& opt) : opt_(opt) {
  std::string parent = opt.log_dir;
  keep_ = !opt.log_dir.empty() || any_redirect(opt.redirects) || any_redirect(opt.tee);
  if (parent.empty()) parent = tdist::settings::get<"TMPDIR">();
  make_dir(parent);
  // The run id comes from the user; keep it to one path component.
  std::string id = opt.rdzv_id;
  for (char& c : id) {
    if (c == '/' || c == '\0') c = '_';
  }
  std::string tmpl = parent + "/" + (opt.log_dir.empty() ? "tdistrun_" : "") + id + "_XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) {
    throw std::runtime_error("cannot create a log directory in " + parent + ": " + std::strerror(errno));
  }
  dir_ = tmpl;
}

LogLayout::~LogLayout() {
  if (keep_ || dir_.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

WorkerLogs LogLayout::for_worker(int attempt, int local_rank, int replacement) const {
  const std::string dir = dir_ + "/attempt_" + std::to_string(attempt) + "/" + std::to_string(local_rank) +
                          (replacement > 0 ? "_replacement" + std::to_string(replacement) : std::string());
  make_dir(dir);
  const int redirect = opt_.redirects.of(local_rank);
  const int tee = opt_.tee.of(local_rank);
  const bool shown = !opt_.local_ranks_filter || opt_.local_ranks_filter->count(local_rank) != 0;
  WorkerLogs logs;
  auto target = [&](int bit, const char* name) {
    StreamTarget t;
    t.console = shown && ((redirect & bit) == 0 || (tee & bit) != 0);
    if (((redirect | tee) & bit) != 0) t.file = dir + "/" + name;
    return t;
  };
  logs.out = target(1, "stdout.log");
  logs.err = target(2, "stderr.log");
  logs.error_file = dir + "/error.json";
  return logs;
}

}  // namespace tdistrun
