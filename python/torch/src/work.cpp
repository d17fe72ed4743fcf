#include "work.h"

#include <atomic>
#include <chrono>

#include <ATen/core/jit_type.h>

#include "tdist/errors.h"

namespace tdist_torch {

WorkTdist::WorkTdist(int rank, c10d::OpType type, std::string op, std::vector<std::shared_ptr<tdist::Work>> works,
                     std::vector<at::Tensor> outputs, std::vector<at::Tensor> inputs)
    : c10d::Work(rank, type),
      op_(std::move(op)),
      works_(std::move(works)),
      outputs_(std::move(outputs)),
      inputs_(std::move(inputs)) {}

bool WorkTdist::isCompleted() {
  for (auto& w : works_)
    if (!w->is_completed()) return false;
  return true;
}

bool WorkTdist::isSuccess() const {
  for (auto& w : works_)
    if (!w->is_success()) return false;
  return true;
}

std::exception_ptr WorkTdist::exception() const {
  for (auto& w : works_)
    if (auto e = w->exception()) return e;
  return nullptr;
}

int WorkTdist::sourceRank() const {
  if (works_.size() != 1)
    throw tdist::DistValueError("tdist (torch backend), rank " + std::to_string(rank_) + ": " + op_ +
                                " has no source rank");
  return works_.front()->source_rank();
}

std::vector<at::Tensor> WorkTdist::result() { return outputs_; }

bool WorkTdist::wait(std::chrono::milliseconds timeout) {
  using clock = std::chrono::steady_clock;
  if (timeout <= std::chrono::milliseconds(0)) {
    for (auto& w : works_) w->wait();
    return true;
  }
  const auto deadline = clock::now() + timeout;
  for (auto& w : works_) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
    // tdist's wait names the operation when it is not done in time.
    w->wait(std::max(left, std::chrono::milliseconds(1)));
  }
  return true;
}

void WorkTdist::abort() {
  throw tdist::DistBackendError("tdist (torch backend), rank " + std::to_string(rank_) + ": " + op_ +
                                ": Work.abort is not supported (destroy the process group to fail pending operations)");
}

bool WorkTdist::is_point_to_point() const {
  return opType_ == c10d::OpType::SEND || opType_ == c10d::OpType::RECV || opType_ == c10d::OpType::RECVANYSOURCE;
}

c10::intrusive_ptr<c10::ivalue::Future> WorkTdist::getFuture() {
  std::lock_guard<std::mutex> lock(future_mu_);
  if (future_) return future_;
  if (is_point_to_point())
    throw tdist::DistBackendError("tdist (torch backend), rank " + std::to_string(rank_) + ": " + op_ +
                                  " has no future (point-to-point operations do not, as with Gloo); use wait()");
  auto future = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
  // Completes once every part has: with the outputs, or the first error.
  // Runs on the thread that finishes the last part (tdist's progress thread
  // for async operations), as Gloo runs it on its worker thread.
  struct Pending {
    std::atomic<size_t> left;
    std::mutex mu;
    std::exception_ptr error;
  };
  auto pending = std::make_shared<Pending>();
  pending->left = works_.size();
  auto outputs = outputs_;
  auto finish = [future, pending, outputs](tdist::Future& part) {
    if (auto e = part.exception()) {
      std::lock_guard<std::mutex> lock(pending->mu);
      if (!pending->error) pending->error = e;
    }
    if (pending->left.fetch_sub(1) != 1) return;
    if (pending->error)
      future->setError(pending->error);
    else
      future->markCompleted(c10::IValue(outputs));
  };
  future_ = future;
  if (works_.empty()) {
    future->markCompleted(c10::IValue(outputs_));
    return future_;
  }
  for (auto& w : works_) w->get_future()->add_done_callback(finish);
  return future_;
}

}  // namespace tdist_torch
