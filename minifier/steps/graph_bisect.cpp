#include <ostream>

#include "minifier/steps/steps.h"

namespace parity::minifier {

Status GraphBisect(StepContext& ctx, ReductionState& state) {
  const auto& graphs = ctx.repro.graphs();
  size_t gi = 0;
  if (graphs.size() > 1) {
    for (; gi < graphs.size(); ++gi) {
      auto test = ctx.test_for_graph(gi);
      const bool fails = test->Test({&graphs[gi].graph})[0];
      state.backend_runs += test->runs();
      if (fails) break;
    }
    if (gi == graphs.size())
      return Error::Runtime("no single graph fails alone with " + state.original.Describe() +
                            " (the failure needs several graphs)");
    ctx.log << "first failing graph: " << graphs[gi].name << " of " << graphs.size() << "\n";
  }
  state.graph_index = gi;
  state.current = graphs[gi].graph.Clone();
  // Candidates run as the program ran this graph (a dir may mix train and eval graphs).
  if (!graphs[gi].mode.empty()) state.base.test = graphs[gi].mode;
  return Status::Ok();
}

}  // namespace parity::minifier
