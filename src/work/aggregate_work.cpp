#include "work/aggregate_work.h"

namespace tdist {

AggregateWork::AggregateWork(std::string op, uint64_t seq, std::vector<std::shared_ptr<Work>> parts)
    : PendingWork(std::move(op), seq), parts_(std::move(parts)), left_(parts_.size()) {}

std::shared_ptr<AggregateWork> AggregateWork::join(std::string op, std::vector<std::shared_ptr<Work>> parts,
                                                   std::vector<Tensor> result) {
  const uint64_t seq = parts.empty() ? 0 : parts.front()->sequence_number();
  auto work = std::make_shared<AggregateWork>(std::move(op), seq, std::move(parts));
  work->set_result(std::move(result));
  if (work->parts_.empty()) {
    work->finish();
    return work;
  }
  // Each part's future calls back once it completes (at once when it already
  // has), on the thread that completes it; the last one finishes this work.
  // The callbacks hold the work until then.
  for (const auto& part : work->parts_) part->get_future()->add_done_callback([work](Future&) { work->part_done(); });
  return work;
}

void AggregateWork::part_done() {
  if (left_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  for (const auto& part : parts_)
    if (auto error = part->exception()) {
      finish(error);
      return;
    }
  finish(nullptr);
}

}  // namespace tdist
