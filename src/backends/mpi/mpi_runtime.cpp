#include "backends/mpi/mpi_runtime.h"

#include <sched.h>

#include <chrono>
#include <cstdlib>
#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "tdist/errors.h"
#include "backends/mpi/mpi_types.h"
#include "util/thread_name.h"

namespace tdist::mpi {

namespace {

std::mutex g_mu;
std::weak_ptr<Runtime> g_runtime;  // guarded by g_mu
std::shared_ptr<Runtime> g_own;    // the process's own hold while tdist's MPI is in use; guarded by g_mu

// After this long without a completion the progress thread sleeps between
// tests instead of yielding: an asynchronous operation only advances inside MPI
// calls, so it must keep testing, but not take a core from the ranks' work.
constexpr std::chrono::microseconds kYieldFor{1000};
constexpr std::chrono::microseconds kLongestNap{200};

}  // namespace

std::string error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  int cls = 0;
  std::string out(text, static_cast<size_t>(len));
  if (MPI_Error_class(code, &cls) == MPI_SUCCESS && cls != code) {
    char ctext[MPI_MAX_ERROR_STRING];
    int clen = 0;
    if (MPI_Error_string(cls, ctext, &clen) == MPI_SUCCESS) out += " (class: " + std::string(ctext, clen) + ")";
  }
  return out + " [MPI error " + std::to_string(code) + "]";
}

const char* Runtime::thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
  }
  return "an unknown MPI thread level";
}

RuntimeHold acquire_runtime(const std::string& who) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (auto held = g_runtime.lock()) return held;
  int finalized = 0, initialized = 0;
  MPI_Finalized(&finalized);
  if (finalized)
    throw DistBackendError(who + ": MPI has been finalised in this process (by destroy_process_group when tdist "
                                 "initialised it, or by the program), and MPI cannot be initialised twice; "
                                 "initialise MPI in the program (MPI_Init_thread) to keep it across "
                                 "init_process_group / destroy_process_group cycles");
  MPI_Initialized(&initialized);
  int provided = MPI_THREAD_SINGLE;
  bool ours = false;
  if (initialized) {
    MPI_Query_thread(&provided);
  } else {
    int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    if (rc != MPI_SUCCESS) throw DistBackendError(who + ": MPI_Init_thread failed: " + error_string(rc));
    ours = true;
  }
  // Funnelled calls come from the backend's own thread, which only
  // MPI_THREAD_SERIALIZED and above allow (as torch's ProcessGroupMPI).
  if (provided < MPI_THREAD_SERIALIZED)
    throw DistBackendError(who + ": the mpi backend needs MPI_THREAD_SERIALIZED or MPI_THREAD_MULTIPLE, and MPI "
                                 "was initialised with " + Runtime::thread_level_name(provided) +
                                 " by the program: initialise it with MPI_Init_thread(..., MPI_THREAD_MULTIPLE, "
                                 "...) or leave it to init_process_group");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  auto runtime = std::shared_ptr<Runtime>(new Runtime(provided, ours));
  g_runtime = runtime;
  if (ours) {
    g_own = runtime;
    static bool registered = false;
    if (!registered) std::atexit(finalize_at_exit);
    registered = true;
  }
  return runtime;
}

void let_go() {
  std::shared_ptr<Runtime> dropped;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    dropped = std::move(g_own);
  }
  // Finalises here if no group holds MPI any more (outside g_mu: ~Runtime joins the MPI thread).
}

// A program that exits without destroy_process_group: MPI must still be
// finalised, or mpirun reports the rank as failed.
void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  std::shared_ptr<Runtime> runtime;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    runtime = g_runtime.lock();
    g_own.reset();
  }
  if (!runtime || !runtime->ours_) return;
  runtime->progress_.reset();
  release_types();
  MPI_Finalize();
}

// The MPI thread: funnelled calls, and the requests of asynchronous operations.
struct Runtime::Progress {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void()>> jobs;                              // guarded by mu
  std::vector<std::pair<MPI_Request, std::function<void(int, const MPI_Status&)>>> added;  // guarded by mu
  bool stopping = false;                                               // guarded by mu
  std::thread::id id;
  std::thread thread;

  Progress() {
    thread = std::thread([this] { loop(); });
    name_thread(thread, "tdist-mpi");
    id = thread.get_id();
  }
  ~Progress() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stopping = true;
    }
    cv.notify_one();
    thread.join();
  }

  void loop() {
    std::vector<MPI_Request> requests;
    std::vector<std::function<void(int, const MPI_Status&)>> dones;
    std::vector<int> indices;
    std::vector<MPI_Status> statuses;
    auto idle_since = std::chrono::steady_clock::now();
    std::chrono::microseconds nap{10};
    for (;;) {
      std::deque<std::function<void()>> run;
      {
        std::unique_lock<std::mutex> lock(mu);
        if (requests.empty() && jobs.empty() && added.empty() && !stopping) cv.wait(lock);
        if (stopping && jobs.empty() && added.empty()) {
          // Requests still pending at shutdown (a peer that never came) are
          // given up: their operations fail rather than hold the process.
          for (auto& done : dones) done(MPI_ERR_OTHER, MPI_Status{});
          return;
        }
        run.swap(jobs);
        for (auto& [request, done] : added) {
          requests.push_back(request);
          dones.push_back(std::move(done));
        }
        added.clear();
      }
      for (auto& job : run) job();
      if (requests.empty()) continue;
      indices.resize(requests.size());
      statuses.resize(requests.size());
      int completed = 0;
      int rc = MPI_Testsome(static_cast<int>(requests.size()), requests.data(), &completed, indices.data(),
                            statuses.data());
      if (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS) {
        // The whole test failed: every request fails with its code.
        for (auto& done : dones) done(rc, MPI_Status{});
        requests.clear();
        dones.clear();
        continue;
      }
      if (completed > 0 && completed != MPI_UNDEFINED) {
        for (int k = 0; k < completed; ++k) {
          const int i = indices[k];
          dones[i](rc == MPI_ERR_IN_STATUS ? statuses[k].MPI_ERROR : MPI_SUCCESS, statuses[k]);
          dones[i] = nullptr;
        }
        size_t w = 0;
        for (size_t i = 0; i < requests.size(); ++i)
          if (dones[i]) {
            requests[w] = requests[i];
            dones[w] = std::move(dones[i]);
            ++w;
          }
        requests.resize(w);
        dones.resize(w);
        idle_since = std::chrono::steady_clock::now();
        nap = std::chrono::microseconds(10);
        continue;
      }
      if (std::chrono::steady_clock::now() - idle_since < kYieldFor) {
        sched_yield();
      } else {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait_for(lock, nap, [&] { return stopping || !jobs.empty() || !added.empty(); });
        nap = std::min(nap * 2, kLongestNap);
      }
    }
  }

  void push(std::function<void()> job) {
    {
      std::lock_guard<std::mutex> lock(mu);
      jobs.push_back(std::move(job));
    }
    cv.notify_one();
  }
};

Runtime::Runtime(int provided, bool ours) : provided_(provided), ours_(ours) {
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  if (MPI_Get_library_version(version, &length) == MPI_SUCCESS)
    mpich_ = std::string(version, static_cast<size_t>(length)).find("MPICH") != std::string::npos;
}

Runtime::~Runtime() {
  progress_.reset();  // drains: every tracked request completes first
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (ours_ && !finalized) {
    release_types();
    MPI_Finalize();
  }
}

Runtime::Progress& Runtime::progress() {
  std::call_once(progress_once_, [this] { progress_ = std::make_unique<Progress>(); });
  return *progress_;
}

void Runtime::call_on_mpi_thread(const std::function<void()>& fn) {
  Progress& p = progress();
  if (std::this_thread::get_id() == p.id) {
    fn();
    return;
  }
  std::promise<void> done;
  auto finished = done.get_future();
  p.push([&] {
    try {
      fn();
      done.set_value();
    } catch (...) {
      done.set_exception(std::current_exception());
    }
  });
  finished.get();
}

void Runtime::post(std::function<void()> fn) {
  if (!funnelled()) {
    fn();
    return;
  }
  progress().push(std::move(fn));
}

void Runtime::track(MPI_Request request, std::function<void(int, const MPI_Status&)> done) {
  Progress& p = progress();
  {
    std::lock_guard<std::mutex> lock(p.mu);
    p.added.emplace_back(request, std::move(done));
  }
  p.cv.notify_one();
}

}  // namespace tdist::mpi
