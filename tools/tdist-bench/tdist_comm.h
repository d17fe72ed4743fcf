// The tdist runner: each benchmark operation as the torch.distributed-style call
// a user would write (blocking, default group).
#pragma once

#include "comm.h"

namespace tbench {

class TdistComm final : public Comm {
 public:
  TdistComm();  // after tdist::init_process_group()
  std::string library() const override;
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void barrier() override;
  double max_double(double v) override;
  int64_t sum_int64(int64_t v) override;
  std::vector<std::string> all_gather_strings(const std::string& s) override;
  std::vector<std::string> settings() const override;
  std::vector<std::string> notes() const override;
  std::string unsupported(Coll c, Dt d, Op o) const override;
  Prepared prepare(const Call& call) override;

 private:
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace tbench
