#include "backends/failure_agreement.h"

#include <algorithm>
#include <set>
#include <thread>

#include "tdist/errors.h"
#include "util/deadline.h"
#include "util/error_context.h"

namespace tdist {

namespace {

// say_alive runs inside an abort: a store that does not answer (its host
// stopped) must not hold the abort long.
constexpr std::chrono::milliseconds kAliveTimeout{2000};
// How often the undecided ranks' listeners are asked (each ask waits a
// little for hosts that do not answer: the backend's Probe sets how long).
constexpr std::chrono::milliseconds kProbeEvery{100};

// Entries of a round's log: "+3;" rank 3 lives, "-3;" rank 3 was proven dead.
void parse_log(const std::string& log, int size, std::set<int>& alive, std::set<int>& dead) {
  size_t i = 0;
  while (i < log.size()) {
    const size_t end = log.find(';', i);
    if (end == std::string::npos) break;
    if (end > i + 1 && (log[i] == '+' || log[i] == '-')) {
      int r = 0;
      bool digits = end - i - 1 <= 9;
      for (size_t k = i + 1; k < end && digits; ++k) {
        digits = log[k] >= '0' && log[k] <= '9';
        r = r * 10 + (log[k] - '0');
      }
      if (digits && r < size) (log[i] == '+' ? alive : dead).insert(r);
    }
    i = end + 1;
  }
}

std::string encode(const std::vector<int>& ranks) {
  std::string out = "dead:";
  for (size_t i = 0; i < ranks.size(); ++i) out += (i ? "," : "") + std::to_string(ranks[i]);
  return out;
}

std::vector<int> decode(const std::string& value, int size, const std::string& label) {
  if (value.rfind("dead:", 0) != 0)
    throw DistBackendError(label + ": failed_ranks: the store holds a malformed answer '" + value.substr(0, 64) + "'");
  std::vector<int> out;
  size_t i = 5;
  while (i < value.size()) {
    size_t end = value.find(',', i);
    if (end == std::string::npos) end = value.size();
    const std::string item = value.substr(i, end - i);
    if (item.empty() || item.size() > 9 || item.find_first_not_of("0123456789") != std::string::npos ||
        std::stoi(item) >= size)
      throw DistBackendError(label + ": failed_ranks: the store holds a malformed answer '" + value.substr(0, 64) +
                             "'");
    out.push_back(std::stoi(item));
    i = end + 1;
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string list(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out.empty() ? "none" : out;
}

}  // namespace

FailureAgreement::FailureAgreement(std::shared_ptr<Store> store, int rank, int size, std::vector<int> launch_ranks,
                                   std::shared_ptr<Store> death_records, std::string label)
    : store_(std::move(store)), rank_(rank), size_(size), launch_ranks_(std::move(launch_ranks)),
      death_records_(std::move(death_records)), label_(std::move(label)) {
  try {
    quick_ = store_->clone();
    quick_->set_timeout(kAliveTimeout);
  } catch (const DistError&) {
    quick_ = store_;  // a store that cannot be cloned (a Python one): its own timeout
  }
}

std::string FailureAgreement::key(const std::string& name) const {
  return "failure/" + std::to_string(round_) + "/" + name;
}

void FailureAgreement::say_alive() noexcept {
  std::string log_key;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (said_alive_ == round_) return;
    said_alive_ = round_;
    log_key = key("log");
  }
  try {
    quick_->append(log_key, "+" + std::to_string(rank_) + ";");
  } catch (...) {
    // The store is gone or stalled: the other survivors find this rank
    // silent; it learns the answer when it asks (or cannot, without a store).
  }
}

bool FailureAgreement::launcher_says_dead(int peer) {
  if (!death_records_ || peer < 0 || peer >= static_cast<int>(launch_ranks_.size())) return false;
  try {
    return death_records_->check({"exited/" + std::to_string(launch_ranks_[peer])});
  } catch (const DistError&) {
    return false;
  }
}

std::vector<int> FailureAgreement::proven_dead(const std::vector<int>& peers, const Evidence& evidence,
                                               const Probe& probe) {
  std::vector<int> dead, unknown;
  for (int m : peers) {
    if ((evidence && evidence(m, false)) || launcher_says_dead(m))
      dead.push_back(m);
    else
      unknown.push_back(m);
  }
  if (probe && !unknown.empty())
    for (int m : probe(unknown)) dead.push_back(m);
  std::sort(dead.begin(), dead.end());
  return dead;
}

void FailureAgreement::next_round() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!answered_) return;  // no answer yet: the current round goes on
  dead_before_ = answer_;
  answer_.clear();
  answered_ = false;
  ++round_;
}

bool FailureAgreement::under_way() {
  std::string log_key;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (answered_) return true;
    log_key = key("log");
  }
  try {
    return store_->check({log_key});
  } catch (const DistError&) {
    return false;
  }
}

std::vector<int> FailureAgreement::known_dead() const {
  std::lock_guard<std::mutex> lock(mu_);
  return answered_ ? answer_ : std::vector<int>{};
}

std::vector<int> FailureAgreement::decide(const Evidence& evidence, const Probe& probe,
                                          std::chrono::milliseconds silence) {
  std::string log_key, answer_key;
  std::vector<int> before;
  bool first_round;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (answered_) return answer_;
    log_key = key("log");
    answer_key = key("answer");
    before = dead_before_;
    first_round = round_ == 0;
  }
  const auto fail = [&](const std::string& what) {
    return with_context(std::current_exception(), label_ + ": failed_ranks: " + what + ": ");
  };
  std::vector<int> members;
  for (int r = 0; r < size_; ++r)
    if (!std::binary_search(before.begin(), before.end(), r)) members.push_back(r);
  std::string value;
  try {
    store_->append(log_key, "+" + std::to_string(rank_) + ";");
    const Deadline give_up = Deadline::after(silence);
    std::set<int> reported;  // proofs this rank wrote to the log
    auto pause = std::chrono::milliseconds(2);
    Deadline next_probe = Deadline::after(std::chrono::milliseconds(0));
    while (true) {
      if (store_->check({answer_key})) {
        value = store_->get(answer_key);
        break;
      }
      std::set<int> alive, dead;
      parse_log(store_->get(log_key), size_, alive, dead);
      // A proof written now counts only after the log is read again: a rank
      // that says it lives just before its proof appears (its listener
      // closes only after it said so) is then seen alive.
      bool proved_now = false;
      const auto prove = [&](int m) {
        if (reported.insert(m).second) {
          store_->append(log_key, "-" + std::to_string(m) + ";");
          proved_now = true;
        }
      };
      std::vector<int> unknown;
      for (int m : members) {
        if (alive.count(m) || dead.count(m) || reported.count(m)) continue;
        if ((evidence && evidence(m, first_round)) || launcher_says_dead(m)) {
          prove(m);
          continue;
        }
        unknown.push_back(m);
      }
      if (probe && !unknown.empty() && next_probe.expired()) {
        for (int m : probe(unknown)) prove(m);
        std::erase_if(unknown, [&](int m) { return reported.count(m) > 0; });
        next_probe = Deadline::after(kProbeEvery);
      }
      if ((unknown.empty() && !proved_now) || give_up.expired()) {
        std::vector<int> answer = before;
        for (int m : members)
          if (!alive.count(m)) answer.push_back(m);
        std::sort(answer.begin(), answer.end());
        value = store_->compare_set(answer_key, "", encode(answer));
        break;
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(50));
    }
  } catch (const DistError&) {
    std::rethrow_exception(fail("the store failed while the survivors agreed on the failed ranks"));
  }
  std::vector<int> answer = decode(value, size_, label_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    answer_ = answer;
    answered_ = true;
  }
  if (std::binary_search(answer.begin(), answer.end(), rank_))
    throw DistBackendError(label_ + ": failed_ranks: the survivors declared this rank failed (it did not say it "
                                    "was alive before they decided; the answer: ranks " +
                           list(answer) + "); it must leave the job");
  return answer;
}

}  // namespace tdist
