// The c10d::Work that torch hands to Python for an operation of the tdist
// backend. It wraps one or more tdist::Works (several for the coalesced
// operations, which run as one tdist operation per tensor) and holds the
// at::Tensors whose memory the operation reads and writes.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "tdist/work.h"

namespace tdist_torch {

class WorkTdist final : public c10d::Work {
 public:
  // `outputs`: what result() and the future hold; `inputs`: other tensors the
  // operation reads, kept alive until it completes.
  WorkTdist(int rank, c10d::OpType type, std::string op, std::vector<std::shared_ptr<tdist::Work>> works,
            std::vector<at::Tensor> outputs, std::vector<at::Tensor> inputs = {});

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  int sourceRank() const override;
  std::vector<at::Tensor> result() override;
  void synchronize() override {}
  // timeout 0 (torch's kNoTimeout): wait as long as the operation takes (it
  // has its own deadline, the group's timeout). Rethrows tdist's error.
  bool wait(std::chrono::milliseconds timeout) override;
  void abort() override;
  // A future completed with the output tensors (DDP's comm hooks chain on
  // it). Point-to-point operations have none, as with Gloo.
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

 private:
  bool is_point_to_point() const;
  const std::string op_;
  const std::vector<std::shared_ptr<tdist::Work>> works_;
  const std::vector<at::Tensor> outputs_;
  const std::vector<at::Tensor> inputs_;
  std::mutex future_mu_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

}  // namespace tdist_torch
