#include "transport/shm/shm_single_copy.h"

#include <deque>
#include <mutex>
#include <string>

#include "util/job_token.h"
#include "util/peer_memory.h"
#include "util/process_identity.h"
#include "util/settings.h"

namespace tdist {

namespace {
std::atomic<uint64_t> g_received{0};
}  // namespace

std::atomic<uint64_t>* new_probe_word() {
  static std::mutex mu;
  static auto* words = new std::deque<std::atomic<uint64_t>>();  // never destroyed: addresses stay valid
  std::lock_guard<std::mutex> lock(mu);
  return &words->emplace_back(0);
}

uint64_t single_copy_messages_received() { return g_received.load(std::memory_order_relaxed); }
void count_single_copy_message() { g_received.fetch_add(1, std::memory_order_relaxed); }

SingleCopyIdentity single_copy_identity(const std::atomic<uint64_t>& word) {
  allow_reads_by_peers();  // the same permission covers writes
  const ProcessIdentity me = this_process();
  uint64_t nonce = 0;
  while (nonce == 0) auth::random_bytes(&nonce, sizeof nonce);  // 0 is what an unset word holds
  return SingleCopyIdentity{me.pid, me.pid_ns, reinterpret_cast<uintptr_t>(&word), nonce};
}

std::string probe_single_copy(const SingleCopyIdentity& peer, uint64_t nonce) {
  const ProcessIdentity me = this_process();
  if (peer.pid <= 0 || peer.probe == 0) return "the peer offered no address";
  if (peer.pid_ns != me.pid_ns) return "the peer runs in another pid namespace";
  if (settings::get<"TDIST_TEST_SHM_SINGLE_COPY_FAIL">()) return "TDIST_TEST_SHM_SINGLE_COPY_FAIL is set";
  uint64_t word = 0;
  void* remote = reinterpret_cast<void*>(static_cast<uintptr_t>(peer.probe));
  if (std::string why = read_peer_memory(peer.pid, remote, &word, sizeof word); !why.empty()) return why;
  if (word != nonce) return "pid " + std::to_string(peer.pid) + " does not hold the nonce sent to the peer";
  return write_peer_memory(peer.pid, &word, remote, sizeof word);
}

}  // namespace tdist
