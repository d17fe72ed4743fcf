#include "util/thread_name.h"

#include <pthread.h>

#include <algorithm>
#include <cstring>
#include <string>

namespace tdist {

namespace {

void set_name(pthread_t thread, const char* name) {
  constexpr size_t kMax = 15;  // the kernel's TASK_COMM_LEN, less its terminator
  std::string cut(name, std::min(std::strlen(name), kMax));
  pthread_setname_np(thread, cut.c_str());
}

}  // namespace

void name_thread(std::thread& thread, const char* name) { set_name(thread.native_handle(), name); }

void name_this_thread(const char* name) { set_name(pthread_self(), name); }

}  // namespace tdist
