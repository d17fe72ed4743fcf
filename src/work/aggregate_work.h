// One Work for several operations issued together (the parts of a coalesced
// call on a backend that runs them one by one): complete once every part is,
// with the first error of any part in issue order.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "work/pending_work.h"

namespace tdist {

class AggregateWork final : public PendingWork {
 public:
  // The Work of `parts` (collectives: each must have a future), reporting
  // `op` with the first part's sequence number; `result`: the outputs its
  // future and result() hold.
  static std::shared_ptr<AggregateWork> join(std::string op, std::vector<std::shared_ptr<Work>> parts,
                                             std::vector<Tensor> result);

  AggregateWork(std::string op, uint64_t seq, std::vector<std::shared_ptr<Work>> parts);

 private:
  void part_done();
  const std::vector<std::shared_ptr<Work>> parts_;
  std::atomic<size_t> left_;
};

}  // namespace tdist
