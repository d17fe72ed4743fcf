// The shared-memory engine: the collectives of a group whose ranks all share
// a host, in the group's segment (src/shm_engine).
#include "shm_engine/host_segment.h"
#include "shm_engine/collectives.h"
#include "engines/engine.h"

namespace tdist {

namespace {

class ShmEngine final : public Engine {
 public:
  explicit ShmEngine(shm_engine::HostSegment& a) : a_(a) {}
  EngineKind kind() const override { return EngineKind::SharedMemory; }
  void broadcast(CollectiveContext& ctx, const Tensor& t, int root) override { shm_engine::broadcast(a_, ctx, t, root); }
  void all_reduce(CollectiveContext& ctx, const Tensor& t, ReduceOp op) override { shm_engine::all_reduce(a_, ctx, t, op); }
  void barrier(CollectiveContext& ctx) override { shm_engine::barrier(a_, ctx); }
  void reduce(CollectiveContext& ctx, const Tensor& t, int root, ReduceOp op) override {
    shm_engine::reduce(a_, ctx, t, root, op);
  }
  void all_gather(CollectiveContext& ctx, const std::vector<Tensor>& outputs, const Tensor& input) override {
    shm_engine::all_gather(a_, ctx, outputs, input);
  }
  void gather(CollectiveContext& ctx, const std::vector<Tensor>& outputs, const Tensor& input, int root) override {
    shm_engine::gather(a_, ctx, outputs, input, root);
  }
  void scatter(CollectiveContext& ctx, const Tensor& output, const std::vector<Tensor>& inputs, int root) override {
    shm_engine::scatter(a_, ctx, output, inputs, root);
  }
  void reduce_scatter(CollectiveContext& ctx, const Tensor& output, const std::vector<Tensor>& inputs,
                      ReduceOp op) override {
    shm_engine::reduce_scatter(a_, ctx, output, inputs, op);
  }
  void all_to_all(CollectiveContext& ctx, const std::vector<Tensor>& outputs,
                  const std::vector<Tensor>& inputs) override {
    shm_engine::all_to_all(a_, ctx, outputs, inputs);
  }

 private:
  shm_engine::HostSegment& a_;
};

}  // namespace

std::unique_ptr<Engine> make_shm_engine(shm_engine::HostSegment& arena) { return std::make_unique<ShmEngine>(arena); }

}  // namespace tdist
