// The tdist runner: each benchmark operation as the torch.distributed-style call
// a user would write (blocking, default group). With --device cuda its buffers
// are device memory and its operations run on a stream of its own, set as
// tdist's current stream; every iteration ends with the host waiting for it.
#pragma once

#include "comm.h"
#include "options.h"

namespace tbench {

class TdistComm final : public Comm {
 public:
  // After tdist::init_process_group(). --device cuda: picks GPU LOCAL_RANK %
  // device count and makes the stream; throws when there is no device.
  explicit TdistComm(const Options& options);
  ~TdistComm() override;
  TdistComm(const TdistComm&) = delete;
  TdistComm& operator=(const TdistComm&) = delete;
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
  std::shared_ptr<void> device_buffer(size_t bytes) override;
  void upload(void* device_dst, const void* host_src, size_t bytes) override;
  void download(void* host_dst, const void* device_src, size_t bytes) override;

 private:
  bool on_device() const { return device_ >= 0; }
  // dst <- src, `bytes`: memcpy, or a device copy in the stream's order.
  void copy(void* dst, const void* src, size_t bytes) const;

  int rank_ = 0;
  int size_ = 1;
  int device_ = -1;          // the CUDA device of the buffers; -1: host memory
  void* stream_ = nullptr;   // --device cuda: the operations' stream
  std::string device_name_;  // "NVIDIA H100 ... (sm_90, ...)"
};

}  // namespace tbench
