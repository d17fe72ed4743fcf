#include "engines/traced_engine.h"

#include <exception>

#include "algorithms/tags.h"
#include "trace/timeline.h"
#include "util/tick_clock.h"

namespace tdist {

namespace {

size_t total_bytes(const std::vector<Tensor>& list) {
  size_t n = 0;
  for (const Tensor& t : list) n += t.nbytes();
  return n;
}

class TracedEngine final : public Engine {
 public:
  TracedEngine(Engine& inner, std::string group, const char* where)
      : inner_(inner), group_(std::move(group)), where_(where) {}
  EngineKind kind() const override { return inner_.kind(); }

  void broadcast(CollectiveContext& ctx, const Tensor& t, int root) override {
    step(ctx, "broadcast", t.nbytes(), [&] { inner_.broadcast(ctx, t, root); });
  }
  void all_reduce(CollectiveContext& ctx, const Tensor& t, ReduceOp op) override {
    step(ctx, "all_reduce", t.nbytes(), [&] { inner_.all_reduce(ctx, t, op); });
  }
  void barrier(CollectiveContext& ctx) override {
    step(ctx, "barrier", 0, [&] { inner_.barrier(ctx); });
  }
  void reduce(CollectiveContext& ctx, const Tensor& t, int root, ReduceOp op) override {
    step(ctx, "reduce", t.nbytes(), [&] { inner_.reduce(ctx, t, root, op); });
  }
  void all_gather(CollectiveContext& ctx, const std::vector<Tensor>& outputs, const Tensor& input) override {
    step(ctx, "all_gather", input.nbytes(), [&] { inner_.all_gather(ctx, outputs, input); });
  }
  void gather(CollectiveContext& ctx, const std::vector<Tensor>& outputs, const Tensor& input, int root) override {
    step(ctx, "gather", input.nbytes(), [&] { inner_.gather(ctx, outputs, input, root); });
  }
  void scatter(CollectiveContext& ctx, const Tensor& output, const std::vector<Tensor>& inputs, int root) override {
    step(ctx, "scatter", total_bytes(inputs), [&] { inner_.scatter(ctx, output, inputs, root); });
  }
  void reduce_scatter(CollectiveContext& ctx, const Tensor& output, const std::vector<Tensor>& inputs,
                      ReduceOp op) override {
    step(ctx, "reduce_scatter", total_bytes(inputs), [&] { inner_.reduce_scatter(ctx, output, inputs, op); });
  }
  void all_to_all(CollectiveContext& ctx, const std::vector<Tensor>& outputs,
                  const std::vector<Tensor>& inputs) override {
    step(ctx, "all_to_all", total_bytes(inputs), [&] { inner_.all_to_all(ctx, outputs, inputs); });
  }

 private:
  template <typename Run>
  void step(const CollectiveContext& ctx, const char* op, size_t bytes, Run&& run) {
    trace::StepLine line{group_, sequence_of(ctx.tag), signature_of(ctx.tag), where_, op, inner_.name(), bytes};
    // The cycle counter, converted as the operations' own times are: the
    // system clock read directly is tens of µs off their conversion on a VM.
    const uint64_t started = now_ticks();
    auto finish = [&](const char* error) {
      const TickConversion clock = recent_conversion();
      line.started_us = clock.realtime_us(started);
      line.ended_us = clock.realtime_us(now_ticks());
      line.error = error;
      trace::write_step_line(line);
    };
    try {
      run();
    } catch (const std::exception& e) {
      finish(e.what());
      throw;
    }
    finish(nullptr);
  }

  Engine& inner_;
  const std::string group_;
  const char* const where_;
};

}  // namespace

std::unique_ptr<Engine> make_traced_engine(Engine& inner, std::string group, const char* where) {
  return std::make_unique<TracedEngine>(inner, std::move(group), where);
}

}  // namespace tdist
