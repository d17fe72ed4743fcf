// Names for the threads tdist starts ("tdist-progress", "tdist-accept", ...),
// so that `top -H`, `ps -L`, gdb and perf show whose thread is whose.
#pragma once

#include <thread>

namespace tdist {

// Names `thread`, from the thread that started it: the name is there as soon
// as this returns, whether or not the new thread has run yet. Linux keeps 15
// characters; longer names are cut there. Failing to name a thread changes
// nothing else, so it is ignored.
void name_thread(std::thread& thread, const char* name);

// The same, for the calling thread.
void name_this_thread(const char* name);

}  // namespace tdist
