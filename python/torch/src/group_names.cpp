#include "group_names.h"

#include <algorithm>
#include <map>
#include <mutex>

#include "tdist/distributed.h"

namespace tdist_torch {

std::string group_name_for(const std::vector<int>& global_ranks) {
  static std::mutex mu;
  static auto* counts = new std::map<std::vector<int>, int>();  // never destroyed: may outlive the interpreter
  std::lock_guard<std::mutex> lock(mu);
  if (global_ranks.empty()) {
    counts->clear();
    return "default_pg";
  }
  std::vector<int> members = global_ranks;
  std::sort(members.begin(), members.end());
  return tdist::new_group_name(members, (*counts)[members]++);
}

}  // namespace tdist_torch
