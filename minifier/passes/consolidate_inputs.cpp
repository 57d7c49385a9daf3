// consolidate-inputs: op nodes that read only the graph's inputs (placeholders and get_attr)
// are folded into the inputs: each becomes a placeholder fed with its reference value. A block
// of such nodes is one target, in graph order.
#include "minifier/passes/passes.h"

namespace parity::minifier {

namespace {
std::vector<const ir::Node*> InputOnlyOps(const ir::Graph& g) {
  std::vector<const ir::Node*> out;
  for (const ir::Node* n : g.ops()) {
    bool only_inputs = true;
    for (const ir::Node* in : n->Inputs())
      if (in->kind() != ir::NodeKind::kPlaceholder && in->kind() != ir::NodeKind::kGetAttr) only_inputs = false;
    if (only_inputs && n->meta.size() <= 1) out.push_back(n);
  }
  return out;
}
}  // namespace

DeltaPass ConsolidateInputsPass() {
  return {"consolidate-inputs", "fold ops that read only inputs into new inputs",
          [](const ir::Graph& g) { return static_cast<int>(InputOnlyOps(g).size()); },
          [](const ir::Graph& g, int begin, int end) -> std::optional<ir::Graph> {
            auto ops = InputOnlyOps(g);
            std::set<const ir::Node*> cut;
            for (int i = begin; i < end && i < static_cast<int>(ops.size()); ++i) cut.insert(ops[i]);
            return CutNodes(g, cut);
          }};
}

}  // namespace parity::minifier
