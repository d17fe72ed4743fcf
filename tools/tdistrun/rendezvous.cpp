#include "rendezvous.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <thread>

#include "local_host.h"
#include "tdist/errors.h"
#include "tdist/store.h"

namespace tdistrun {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// How often a waiting agent looks at the store again.
constexpr milliseconds kJoinPoll{50};

milliseconds to_ms(double seconds) { return milliseconds(static_cast<long long>(seconds * 1000.0)); }

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%gs", s);
  return buf;
}

std::string endpoint_text(const std::string& host, int port) {
  return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

// The store may hold only numbers the agents wrote, in [lo, hi]; anything
// else (a broken job, or a stranger where the job has no token) stops this one.
long long to_number(const std::string& text, const std::string& what, long long lo, long long hi) {
  try {
    size_t used = 0;
    long long v = std::stoll(text, &used);
    if (used == text.size() && v >= lo && v <= hi) return v;
  } catch (const std::exception&) {
  }
  throw RendezvousError("the rendezvous store holds '" + text.substr(0, 64) + "' for " + what +
                        ", not a number in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

constexpr long long kMaxRound = 1'000'000'000;
constexpr long long kMaxWorkersPerNode = 1'000'000;  // as --nproc-per-node
constexpr long long kMaxWorld = 2'147'483'647;       // ranks are ints

}  // namespace

AgentRendezvous::AgentRendezvous(const Options& opt) : opt_(opt), host_(opt.master_addr), port_(opt.master_port) {
  const bool single = !opt.rdzv.dynamic && opt.nnodes == 1;
  bool try_host = single || (!opt.rdzv.dynamic && opt.node_rank == 0) || (opt.rdzv.dynamic && is_local_host(host_));
  tdist::TCPStoreOptions so;
  so.timeout = to_ms(opt.rdzv.join_timeout_s);
  so.wait_for_workers = false;
  const std::string where = endpoint_text(host_, port_);
  if (try_host) {
    so.is_master = true;
    try {
      auto store = std::make_shared<tdist::TCPStore>(host_, static_cast<uint16_t>(port_), so);
      port_ = store->port();
      store_ = store;
      hosts_ = true;
    } catch (const tdist::DistError& e) {
      // With c10d, another agent on this machine may already host it: join that one.
      if (!opt.rdzv.dynamic) {
        throw RendezvousError("cannot host the rendezvous store on " + where + ": " + e.what() +
                              (single ? " (pick another --master-port, or --standalone for a free one)" : ""));
      }
    }
  }
  if (!store_) {
    so.is_master = false;
    try {
      store_ = std::make_shared<tdist::TCPStore>(host_, static_cast<uint16_t>(port_), so);
    } catch (const tdist::DistError& e) {
      throw RendezvousError("cannot reach the rendezvous store on " + where + " within join_timeout " +
                            seconds_text(opt.rdzv.join_timeout_s) + ": " + e.what());
    }
  }
}

AgentRendezvous::~AgentRendezvous() = default;

std::string AgentRendezvous::key(const std::string& name) const { return "/tdistrun/" + opt_.rdzv_id + "/" + name; }

std::string AgentRendezvous::round_key(int round, const std::string& name) const {
  return key("round_" + std::to_string(round) + "/" + name);
}

std::string AgentRendezvous::workers_prefix(int round) const {
  return "/tdistrun/" + opt_.rdzv_id + "/workers_" + std::to_string(round) + "/";
}

AgentRendezvous::Joined AgentRendezvous::join(int local_nproc, Placement* placement) {
  try {
    int round = round_ + 1;
    if (round_ < 0 && store_->check({key("current")})) {
      round = static_cast<int>(to_number(store_->get(key("current")), "the current round", 0, kMaxRound));
    }
    int node_rank = 0;
    while (true) {
      if (store_->check({key("finished")})) return Joined::kJobFinished;
      node_rank = opt_.rdzv.dynamic ? join_dynamic(&round) : join_static(&round);
      if (node_rank < 0) continue;  // this round formed without us: the next one
      break;
    }
    round_ = round;
    node_rank_ = node_rank;
    store_->set(round_key(round, "nproc/" + std::to_string(node_rank)), std::to_string(local_nproc));
    std::vector<std::string> keys;
    for (int i = 0; i < nnodes_; ++i) keys.push_back(round_key(round, "nproc/" + std::to_string(i)));
    std::vector<std::string> counts;
    try {
      counts = store_->multi_get(keys);
    } catch (const tdist::DistStoreError& e) {
      throw RendezvousError("rendezvous round " + std::to_string(round) + ": not every node said how many workers it " +
                            "runs within join_timeout " + seconds_text(opt_.rdzv.join_timeout_s) + ": " + e.what());
    }
    Placement p;
    p.round = round;
    p.node_rank = node_rank;
    p.nnodes = nnodes_;
    p.world_size = 0;
    for (int i = 0; i < nnodes_; ++i) {
      long long n = to_number(counts[static_cast<size_t>(i)], "node " + std::to_string(i) + "'s workers", 1,
                              kMaxWorkersPerNode);
      if (i < node_rank) p.rank_offset += n;
      p.world_size += n;
    }
    if (p.world_size > kMaxWorld) {
      throw RendezvousError("rendezvous round " + std::to_string(round) + ": the nodes' workers add up to " +
                            std::to_string(p.world_size) + " ranks, more than a rank number can hold");
    }
    p.restart_count = static_cast<int>(store_->add(key("failures"), 0));
    p.store_prefix = workers_prefix(round);
    // Newcomers start from the latest round that formed.
    store_->set(key("current"), std::to_string(round));
    last_beat_ = {};
    *placement = p;
    return Joined::kInRound;
  } catch (const tdist::DistError& e) {
    throw RendezvousError("rendezvous through the store on " + endpoint_text(host_, port_) + " failed: " + e.what());
  }
}

// This node's rank, or -1 when the round had formed before (this node's
// tdistrun was started again after it died) and *round moved to the next.
int AgentRendezvous::join_static(int* round_ptr) {
  const int round = *round_ptr;
  const std::string me = std::to_string(opt_.node_rank);
  if (store_->add(round_key(round, "claim/" + me), 1) > 1) {
    if (store_->add(round_key(round, "joined"), 0) >= opt_.nnodes) {
      *round_ptr += 1;
      return -1;
    }
    throw RendezvousError("rendezvous round " + std::to_string(round) + ": node rank " + me +
                          " joined twice: two nodes were given the same --node-rank");
  }
  store_->add(round_key(round, "joined"), 1);
  const auto deadline = Clock::now() + to_ms(opt_.rdzv.join_timeout_s);
  while (store_->add(round_key(round, "joined"), 0) < opt_.nnodes) {
    if (Clock::now() >= deadline) {
      std::string missing;
      for (int i = 0; i < opt_.nnodes; ++i) {
        if (!store_->check({round_key(round, "claim/" + std::to_string(i))})) missing += (missing.empty() ? "" : ", ") + std::to_string(i);
      }
      throw RendezvousError("rendezvous round " + std::to_string(round) + ": node(s) " + missing + " of " +
                            std::to_string(opt_.nnodes) + " did not join within join_timeout " +
                            seconds_text(opt_.rdzv.join_timeout_s));
    }
    pause();
  }
  nnodes_ = opt_.nnodes;
  return opt_.node_rank;
}

// The ticket this agent draws is its node rank if the round closes with at
// least that many nodes; otherwise -1 and *round moves to the next round.
int AgentRendezvous::join_dynamic(int* round) {
  const auto& r = opt_.rdzv;
  const std::string joined = round_key(*round, "joined");
  const std::string closed = round_key(*round, "closed");
  const long long ticket = store_->add(joined, 1);
  const auto deadline = Clock::now() + to_ms(r.join_timeout_s);
  std::optional<Clock::time_point> min_reached;
  long long size = 0;
  while (true) {
    if (store_->check({closed})) {
      size = to_number(store_->get(closed), "the size of round " + std::to_string(*round), 1, r.max_nodes);
      break;
    }
    if (store_->check({key("finished")})) return -1;
    const long long n = store_->add(joined, 0);
    if (n >= r.max_nodes) {
      store_->compare_set(closed, "", std::to_string(r.max_nodes));
      continue;
    }
    if (n >= r.min_nodes) {
      if (!min_reached) min_reached = Clock::now();
      if (Clock::now() - *min_reached >= to_ms(r.last_call_timeout_s)) {
        store_->compare_set(closed, "", std::to_string(n));
        continue;
      }
    } else if (Clock::now() >= deadline) {
      throw RendezvousError("rendezvous round " + std::to_string(*round) + ": " + std::to_string(n) + " of at least " +
                            std::to_string(r.min_nodes) + " nodes joined within join_timeout " +
                            seconds_text(r.join_timeout_s) + " (endpoint " + endpoint_text(host_, port_) + ")");
    }
    pause();
  }
  if (ticket > size) {
    *round += 1;
    return -1;
  }
  nnodes_ = static_cast<int>(size);
  return static_cast<int>(ticket - 1);
}

void AgentRendezvous::pause() {
  if (interrupted_) {
    if (int sig = interrupted_()) throw RendezvousInterrupted(sig);
  }
  std::this_thread::sleep_for(kJoinPoll);
}

void AgentRendezvous::heartbeat() {
  const auto now = Clock::now();
  if (now - last_beat_ < milliseconds(500)) return;
  last_beat_ = now;
  store_->add(round_key(round_, "beat/" + std::to_string(node_rank_)), 1);
}

AgentRendezvous::Poll AgentRendezvous::poll() {
  Poll p;
  try {
    heartbeat();
    const std::string restart = round_key(round_, "restart");
    if (opt_.rdzv.dynamic && nnodes_ < opt_.rdzv.max_nodes && !store_->check({key("finished")}) &&
        store_->add(round_key(round_ + 1, "joined"), 0) > 0) {
      // A node waits to join and the job has room: everyone starts the next round.
      store_->compare_set(restart, "", "a new node asked to join (the job has " + std::to_string(nnodes_) +
                                           " of at most " + std::to_string(opt_.rdzv.max_nodes) + " nodes)");
    }
    if (!store_->check({restart})) return p;
    p.stop = true;
    p.reason = store_->get(restart);
    p.job_failed = store_->add(key("failures"), 0) > opt_.max_restarts;
  } catch (const tdist::DistError& e) {
    throw RendezvousError("lost the rendezvous store on " + endpoint_text(host_, port_) + ": " + e.what());
  }
  return p;
}

void AgentRendezvous::report_failure(const std::string& reason) {
  try {
    // One failure per round, however many nodes see their workers fail.
    if (store_->add(round_key(round_, "failure_counted"), 1) == 1) store_->add(key("failures"), 1);
    store_->compare_set(round_key(round_, "restart"), "", reason);
  } catch (const tdist::DistError& e) {
    throw RendezvousError("lost the rendezvous store on " + endpoint_text(host_, port_) + ": " + e.what());
  }
}

void AgentRendezvous::report_exit(long long rank, const std::string& what) {
  try {
    // Through the workers' own view (env:// wraps this store in the same PrefixStore), so that they read exited/<rank>.
    tdist::PrefixStore(workers_prefix(round_), store_).set("exited/" + std::to_string(rank), what);
  } catch (const tdist::DistError& e) {
    throw RendezvousError("lost the rendezvous store on " + endpoint_text(host_, port_) + ": " + e.what());
  }
}

void AgentRendezvous::report_done() {
  try {
    if (store_->add(round_key(round_, "done"), 1) >= nnodes_) store_->set(key("finished"), "1");
  } catch (const tdist::DistError&) {
    // The host is gone after our workers finished: nothing is left to tell.
  }
}

void AgentRendezvous::leave() {
  try {
    if (round_ >= 0) store_->add(round_key(round_, "left"), 1);
    if (!hosts_ || round_ < 0) return;
    // Serve the others until they have left. One that stopped beating for
    // a while is gone (killed with its workers); close_timeout bounds it all.
    const auto deadline = Clock::now() + to_ms(opt_.rdzv.close_timeout_s);
    const auto silence = std::max(milliseconds(5000), to_ms(opt_.monitor_interval_s * 20));
    std::vector<long long> beats(static_cast<size_t>(nnodes_), -1);
    std::vector<Clock::time_point> changed(static_cast<size_t>(nnodes_), Clock::now());
    while (Clock::now() < deadline && store_->add(round_key(round_, "left"), 0) < nnodes_) {
      bool any_alive = false;
      for (int i = 0; i < nnodes_; ++i) {
        if (i == node_rank_) continue;
        long long b = store_->add(round_key(round_, "beat/" + std::to_string(i)), 0);
        if (b != beats[static_cast<size_t>(i)]) {
          beats[static_cast<size_t>(i)] = b;
          changed[static_cast<size_t>(i)] = Clock::now();
        }
        if (Clock::now() - changed[static_cast<size_t>(i)] < silence) any_alive = true;
      }
      if (!any_alive) break;
      std::this_thread::sleep_for(milliseconds(100));
    }
  } catch (const tdist::DistError&) {
    // Leaving anyway.
  }
}

}  // namespace tdistrun
