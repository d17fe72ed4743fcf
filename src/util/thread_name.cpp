#include "util/thread_name.h"

#include <pthread.h>

#include <algorithm>
#include <cstring>
#include <string>

namespace tdist {

void name_this_thread(const char* name) {
  constexpr size_t kMax = 15;  // the kernel's TASK_COMM_LEN, less its terminator
  std::string cut(name, std::min(std::strlen(name), kMax));
  pthread_setname_np(pthread_self(), cut.c_str());
}

}  // namespace tdist
