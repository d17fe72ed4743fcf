// Store's default multi-key operations and queues, for stores without a
// native form.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <random>

#include "store/store_util.h"
#include "tdist/errors.h"
#include "tdist/store.h"

namespace tdist {

using store_detail::quote;

std::vector<std::string> Store::multi_get(const std::vector<std::string>& keys) {
  // Wait for all keys at once (one timeout for the whole call, as a native
  // multi_get would), then read them.
  if (!keys.empty()) wait(keys, timeout());
  std::vector<std::string> values;
  values.reserve(keys.size());
  for (const auto& k : keys) values.push_back(get(k));
  return values;
}

void Store::multi_set(const std::vector<std::string>& keys, const std::vector<std::string>& values) {
  if (keys.size() != values.size())
    throw DistValueError("multi_set: " + std::to_string(keys.size()) + " keys but " + std::to_string(values.size()) +
                         " values");
  for (size_t i = 0; i < keys.size(); ++i) set(keys[i], values[i]);
}

// ---------------------------------------------------------------- queues
//
// A queue under `key` is a ticket counter, a head and one key per value:
//   <key>/.queue/tail   counter (add): tickets handed to pushers so far
//   <key>/.queue/head   "N" or "N:nonce": values [0, N) have been popped
//   <key>/.queue/<i>    the value of ticket i, until it is popped
// A push takes a ticket and sets its key. A pop reads the head N, waits until
// value N exists, and only then claims it by moving the head from what it
// read to "N+1:nonce" with compare_set: the nonce, unique to this attempt,
// tells the winner apart (a plain "N+1" could also be another popper's), and
// makes every head value new, so a stale read can never claim twice. A pop
// that times out has claimed nothing. The claimer alone reads and removes the
// value's key. (A pusher killed between its two steps leaves a gap that later
// pops wait at; TCPStore's queues live on its server and have none.)

namespace {

std::string queue_key(const std::string& key, const char* part) { return key + "/.queue/" + part; }
std::string item_key(const std::string& key, int64_t i) { return key + "/.queue/" + std::to_string(i); }

// The index N of a head value "N" or "N:nonce".
int64_t head_index(const std::string& key, const std::string& head) {
  const auto colon = head.find(':');
  auto n = store_detail::parse_counter(head.substr(0, colon));
  if (!n || *n < 0)
    throw DistStoreError("queue " + quote(key) + ": its head " + quote(queue_key(key, "head")) + " holds " +
                         quote(head) + ", not a queue position (was the key written by something else?)");
  return *n;
}

std::string claim_nonce() {
  static std::atomic<uint64_t> counter{0};
  thread_local const uint64_t seed = [] {
    std::random_device rd;
    return (uint64_t{rd()} << 32) ^ rd() ^ static_cast<uint64_t>(::getpid());
  }();
  return std::to_string(seed) + "." + std::to_string(counter.fetch_add(1, std::memory_order_relaxed));
}

}  // namespace

void Store::queue_push(const std::string& key, const std::string& value) {
  const int64_t ticket = add(queue_key(key, "tail"), 1) - 1;
  set(item_key(key, ticket), value);
}

std::string Store::queue_pop(const std::string& key, bool block, std::chrono::milliseconds timeout) {
  const std::string head_key = queue_key(key, "head");
  // Reads the head, creating it ("0") for a queue never popped.
  auto read_head = [&] { return compare_set(head_key, "", "0"); };
  const Deadline deadline = store_detail::deadline_after(timeout);
  // A pop waits for value N in slices: another popper may take N (and remove
  // its key) while this one waits, and only a new read of the head says so.
  constexpr Millis kFirstSlice{20}, kLongestSlice{1000};
  Millis slice = kFirstSlice;
  std::string head = read_head();
  for (;;) {
    const int64_t n = head_index(key, head);
    const std::string item = item_key(key, n);
    if (!check({item})) {
      if (!block || deadline.expired()) {
        std::string now = read_head();
        if (now != head) {  // popped meanwhile: look at the new head
          head = std::move(now);
          slice = kFirstSlice;
          continue;
        }
        if (!block) throw DistQueueEmptyError("queue_pop(key " + quote(key) + ", block=false): the queue is empty");
        throw DistStoreError("queue_pop(key " + quote(key) + ") timed out after " + format_ms(timeout) +
                             ": the queue stayed empty");
      }
      try {
        // At least 1 ms: some stores read a zero timeout as "the default".
        wait({item}, std::max(Millis(1), std::min(slice, deadline.remaining())));
      } catch (const DistStoreError&) {
        // Not there yet: has the head moved?
        std::string now = read_head();
        if (now != head) {
          head = std::move(now);
          slice = kFirstSlice;
        } else {
          slice = std::min(slice * 2, kLongestSlice);
        }
        continue;
      }
    }
    const std::string claimed = std::to_string(n + 1) + ":" + claim_nonce();
    std::string after = compare_set(head_key, head, claimed);
    if (after != claimed) {  // another popper took value n
      head = std::move(after);
      slice = kFirstSlice;
      continue;
    }
    std::string value = get(item);
    try {
      delete_key(item);
    } catch (const std::exception&) {
      // A store that cannot delete keys (FileStore) keeps it; the value is ours.
    }
    return value;
  }
}

std::vector<std::string> Store::list_keys() {
  throw DistStoreError("list_keys: this kind of store cannot list its keys (HashStore, FileStore, TCPStore and "
                       "PrefixStore can; a Python subclass defines list_keys)");
}

std::shared_ptr<Store> Store::clone() {
  throw DistStoreError("clone: this kind of store cannot be cloned (HashStore, FileStore, TCPStore and PrefixStore "
                       "can; a Python subclass defines clone)");
}

int64_t Store::queue_len(const std::string& key) {
  const std::string head_key = queue_key(key, "head"), tail_key = queue_key(key, "tail");
  // The head first: the tail only grows, so the tail read after it is not behind it.
  const int64_t head = check({head_key}) ? head_index(key, get(head_key)) : 0;
  const int64_t tail = check({tail_key}) ? add(tail_key, 0) : 0;
  return std::max<int64_t>(tail - head, 0);
}

}  // namespace tdist
