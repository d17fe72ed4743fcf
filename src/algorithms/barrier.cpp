#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "tdist/errors.h"
#include "algorithms/blocks.h"
#include "algorithms/collective.h"
#include "algorithms/monitored_barrier_message.h"

namespace tdist::algorithms {

namespace {

// The global rank of group rank r, read from the transport's description of
// it ("rank 3 (group rank 2) at ..."); r itself when the description has none.
int global_rank_of(Transport& transport, int r) {
  const std::string d = transport.describe_peer(r);
  if (d.rfind("rank ", 0) != 0) return r;
  char* end = nullptr;
  long g = std::strtol(d.c_str() + 5, &end, 10);
  return end == d.c_str() + 5 ? r : static_cast<int>(g);
}

}  // namespace

// Dissemination barrier: in round k every rank signals rank+2^k and waits for
// rank-2^k; after ceil(log2 n) rounds everyone has heard from everyone.
void barrier_dissemination(CollectiveContext& ctx) {
  const int n = ctx.size();
  const int r = ctx.rank();
  char out = 1, in = 0;
  abort_on_error(ctx.transport, [&] {
    uint32_t round = 0;
    for (int k = 1; k < n; k <<= 1, ++round) {
      ctx.send_recv((r + k) % n, &out, 1, (r - k + n) % n, &in, 1, round);
    }
  });
}

// Rank 0 hears from every rank, then releases them. A rank that does not
// arrive by the deadline is named by rank 0 in torch's words ("[Rank 0]: Rank
// 1 failed to pass monitoredBarrier in 2000 ms"; every such rank with
// wait_all_ranks, "Ranks 1, 3"), by global rank like every tdist error,
// followed by its description (group rank where it differs, and address).
// With no time at all (a timeout of 0), rank 0 says it timed out, as Gloo.
void monitored_barrier(CollectiveContext& ctx, bool wait_all_ranks) {
  const int n = ctx.size();
  char token = 1;
  if (ctx.rank() != 0) {
    ctx.send(0, 0, &token, 1);
    ctx.recv(0, 1, &token, 1);
    return;
  }
  std::vector<char> tokens(n);
  std::vector<std::shared_ptr<Request>> arrivals(n);
  for (int r = 1; r < n; ++r) arrivals[r] = ctx.transport.irecv(r, step_tag(ctx.tag, 0), &tokens[r], 1);
  // Wait for every rank up to the one deadline (not one timeout per rank), so
  // all late ranks can be named.
  // A timeout of 0 (not a deadline a loaded machine let pass): the same words on every run.
  const bool no_time_left = ctx.deadline.timeout().count() <= 0;
  std::vector<int> missing;
  for (int r = 1; r < n; ++r) {
    // Driving the transport here, as every other wait does, rather than
    // sleeping until the transport's background thread completes the receive.
    if (!ctx.transport.wait_a_while(*arrivals[r], ctx.deadline) || arrivals[r]->error()) {
      missing.push_back(r);
      if (!wait_all_ranks) break;
    }
  }
  if (!missing.empty()) {
    std::vector<int> global;
    std::string peers;
    for (size_t i = 0; i < missing.size(); ++i) {
      global.push_back(global_rank_of(ctx.transport, missing[i]));
      peers += (i ? "; " : "") + ctx.transport.describe_peer(missing[i]);
    }
    const std::string what =
        monitored_barrier_failure(global, ctx.deadline.timeout(), wait_all_ranks, no_time_left, peers);
    auto error = std::make_exception_ptr(DistBackendError(what));
    // The receives of the ranks still missing point into `tokens`: abort (which
    // fails them and stops the progress thread) before `tokens` is released.
    ctx.transport.abort(error);
    std::rethrow_exception(error);
  }
  for (int r = 1; r < n; ++r) ctx.send(r, 1, &token, 1);
}

}  // namespace tdist::algorithms
