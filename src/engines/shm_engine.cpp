// The shared-memory engine: the collectives of a group whose ranks all share
// a host, in the group's segment (src/arena).
#include "arena/arena.h"
#include "arena/collectives.h"
#include "engines/engine.h"

namespace tdist {

namespace {

class ShmEngine final : public Engine {
 public:
  explicit ShmEngine(arena::Arena& a) : a_(a) {}
  const char* name() const override { return "shm"; }
  void broadcast(CollectiveContext& ctx, const Tensor& t, int root) override { arena::broadcast(a_, ctx, t, root); }
  void all_reduce(CollectiveContext& ctx, const Tensor& t, ReduceOp op) override { arena::all_reduce(a_, ctx, t, op); }
  void barrier(CollectiveContext& ctx) override { arena::barrier(a_, ctx); }
  void reduce(CollectiveContext& ctx, const Tensor& t, int root, ReduceOp op) override {
    arena::reduce(a_, ctx, t, root, op);
  }
  void all_gather(CollectiveContext& ctx, const std::vector<Tensor>& outputs, const Tensor& input) override {
    arena::all_gather(a_, ctx, outputs, input);
  }
  void gather(CollectiveContext& ctx, const std::vector<Tensor>& outputs, const Tensor& input, int root) override {
    arena::gather(a_, ctx, outputs, input, root);
  }
  void scatter(CollectiveContext& ctx, const Tensor& output, const std::vector<Tensor>& inputs, int root) override {
    arena::scatter(a_, ctx, output, inputs, root);
  }
  void reduce_scatter(CollectiveContext& ctx, const Tensor& output, const std::vector<Tensor>& inputs,
                      ReduceOp op) override {
    arena::reduce_scatter(a_, ctx, output, inputs, op);
  }
  void all_to_all(CollectiveContext& ctx, const std::vector<Tensor>& outputs,
                  const std::vector<Tensor>& inputs) override {
    arena::all_to_all(a_, ctx, outputs, inputs);
  }

 private:
  arena::Arena& a_;
};

}  // namespace

std::unique_ptr<Engine> make_shm_engine(arena::Arena& arena) { return std::make_unique<ShmEngine>(arena); }

}  // namespace tdist
