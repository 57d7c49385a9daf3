// eliminate-dead-code: removes nodes no output depends on, and unused placeholders. Tested like
// any candidate: a crash in a dead op disappears with it, and then the candidate is rejected.
#include "minifier/passes/passes.h"

#include "repro/graph_json.h"

namespace parity::minifier {

DeltaPass EliminateDeadCodePass() {
  return {"eliminate-dead-code", "remove dead nodes and unused placeholders",
          [](const ir::Graph& g) { return Cleaned(g.Clone()).size() < g.size() ? 1 : 0; },
          [](const ir::Graph& g, int, int) -> std::optional<ir::Graph> { return Cleaned(g.Clone()); }};
}

}  // namespace parity::minifier
