// The transport engine: every collective as the selector's algorithm over
// messages (src/algorithms).
#include "engines/engine.h"

#include "algorithms/selector.h"

namespace tdist {

namespace {

class TransportEngine final : public Engine {
 public:
  EngineKind kind() const override { return EngineKind::Transport; }
  void broadcast(CollectiveContext& ctx, const Tensor& t, int root) override { algorithms::broadcast(ctx, t, root); }
  void all_reduce(CollectiveContext& ctx, const Tensor& t, ReduceOp op) override { algorithms::all_reduce(ctx, t, op); }
  void barrier(CollectiveContext& ctx) override { algorithms::barrier_dissemination(ctx); }
  void reduce(CollectiveContext& ctx, const Tensor& t, int root, ReduceOp op) override {
    algorithms::reduce(ctx, t, root, op);
  }
  void all_gather(CollectiveContext& ctx, const std::vector<Tensor>& outputs, const Tensor& input) override {
    algorithms::all_gather(ctx, outputs, input);
  }
  void gather(CollectiveContext& ctx, const std::vector<Tensor>& outputs, const Tensor& input, int root) override {
    algorithms::gather(ctx, outputs, input, root);
  }
  void scatter(CollectiveContext& ctx, const Tensor& output, const std::vector<Tensor>& inputs, int root) override {
    algorithms::scatter(ctx, output, inputs, root);
  }
  void reduce_scatter(CollectiveContext& ctx, const Tensor& output, const std::vector<Tensor>& inputs,
                      ReduceOp op) override {
    algorithms::reduce_scatter(ctx, output, inputs, op);
  }
  void all_to_all(CollectiveContext& ctx, const std::vector<Tensor>& outputs,
                  const std::vector<Tensor>& inputs) override {
    algorithms::all_to_all(ctx, outputs, inputs);
  }
};

}  // namespace

Engine& transport_engine() {
  static TransportEngine engine;  // stateless: one for the process
  return engine;
}

}  // namespace tdist
