// The torch.distributed functions. They act on the default group unless a
// group is passed; ranks (src, dst) are global ranks as in torch.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "tdist/process_group.h"

namespace tdist {

using Group = std::shared_ptr<ProcessGroup>;

struct InitOptions {
  std::string backend = "tdist";     // or "gloo" (alias), or "cpu:tdist,cuda:nccl"
  std::string init_method{};           // "env://" (default), "tcp://host:port", "file:///path"
  int world_size = -1;               // -1: from init_method or the environment
  int rank = -1;                     // -1: from init_method or the environment
  std::shared_ptr<Store> store{};      // exclusive with init_method
  std::chrono::milliseconds timeout = kDefaultTimeout;
  std::string group_name{};            // deprecated in torch; kept for messages
};

bool is_available();
// Initializes the default group; blocks until every rank joins or the timeout
// passes (then DistError listing the ranks that did not arrive).
void init_process_group(const InitOptions& options = {});
// torch's positional form: init_process_group("tdist", "tcp://10.1.1.20:23456", 4, rank).
// (const char* so that init_process_group({.backend = ...}) stays unambiguous.)
void init_process_group(const char* backend, const std::string& init_method = "", int world_size = -1,
                        int rank = -1, std::chrono::milliseconds timeout = kDefaultTimeout);
bool is_initialized();
bool is_torchelastic_launched();
// Destroys the given group, or with nullptr every group and the default one.
void destroy_process_group(const Group& group = nullptr);
// The default group (DistError when not initialized).
Group group_world();

int get_rank(const Group& group = nullptr);        // -1 when this rank is not in group
int get_world_size(const Group& group = nullptr);
std::string get_backend(const Group& group = nullptr);

// Point-to-point. recv with src = kAnySource (-1) takes the first message of
// that tag from any rank and returns the sender's global rank.
void send(const Tensor& tensor, int dst, const Group& group = nullptr, int tag = 0);
int recv(const Tensor& tensor, int src = kAnySource, const Group& group = nullptr, int tag = 0);
std::shared_ptr<Work> isend(const Tensor& tensor, int dst, const Group& group = nullptr, int tag = 0);
std::shared_ptr<Work> irecv(const Tensor& tensor, int src = kAnySource, const Group& group = nullptr, int tag = 0);

// Collectives: with async_op the returned Work is pending, else already complete.
std::shared_ptr<Work> broadcast(const Tensor& tensor, int src, const Group& group = nullptr, bool async_op = false);
std::shared_ptr<Work> all_reduce(const Tensor& tensor, ReduceOp op = ReduceOp::SUM, const Group& group = nullptr,
                                 bool async_op = false);
std::shared_ptr<Work> barrier(const Group& group = nullptr, bool async_op = false);

}  // namespace tdist
