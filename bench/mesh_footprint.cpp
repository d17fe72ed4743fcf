// Sockets, threads and resident memory of rank 0 before and after a 2x2x2
// DeviceMesh with all its subgroups: the mesh's three dimensions, and
// new_subgroups of 2 and 4 ranks, each group used by one all_reduce (so every
// connection it needs is up). Run by bench/footprint.sh under tdistrun with 8 ranks.
#include <dirent.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include <tdist/tdist.h>

namespace {

int count_entries(const char* dir, const char* link_prefix) {
  int n = 0;
  DIR* d = opendir(dir);
  if (!d) return -1;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    char link[256] = {0};
    const std::string path = std::string(dir) + "/" + e->d_name;
    if (!link_prefix || (readlink(path.c_str(), link, sizeof(link) - 1) > 0 &&
                         std::string(link).rfind(link_prefix, 0) == 0))
      ++n;
  }
  closedir(d);
  return n;
}

long rss_kib() {
  std::ifstream f("/proc/self/status");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return 0;
}

struct Footprint {
  int sockets = count_entries("/proc/self/fd", "socket:");
  int threads = count_entries("/proc/self/task", nullptr);
  long rss = rss_kib();
};

}  // namespace

int main() {
  tdist::init_process_group({.backend = "tdist"});
  if (tdist::get_world_size() != 8) {
    std::fprintf(stderr, "mesh_footprint: run it with 8 ranks\n");
    return 2;
  }
  const Footprint before;
  auto mesh = tdist::init_device_mesh("cpu", {2, 2, 2}, {"a", "b", "c"});
  std::vector<tdist::Group> groups = mesh->get_all_groups();
  for (int size : {2, 4}) groups.push_back(tdist::new_subgroups(size).first);
  for (auto& g : groups) {
    std::vector<float> v(4, 1.0f);
    tdist::all_reduce(v, tdist::ReduceOp::SUM, g);
  }
  tdist::barrier();
  const Footprint after;
  if (tdist::get_rank() == 0)
    std::printf("rank 0: default group only: %d sockets, %d threads, %ld KiB resident; "
                "with a 2x2x2 mesh and its subgroups (%zu groups): %d sockets, %d threads, %ld KiB resident\n",
                before.sockets, before.threads, before.rss, groups.size(), after.sockets, after.threads, after.rss);
  tdist::destroy_process_group();
}
