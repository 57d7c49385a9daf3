// remove-outputs: drops a block of the graph's outputs (at least one stays); what only those
// outputs needed dies with them.
#include "minifier/passes/passes.h"

namespace parity::minifier {

DeltaPass RemoveOutputsPass() {
  return {"remove-outputs", "drop blocks of outputs",
          [](const ir::Graph& g) { return static_cast<int>(g.OutputValues().size()); },
          [](const ir::Graph& g, int begin, int end) -> std::optional<ir::Graph> {
            auto outs = g.OutputValues();
            std::vector<std::string> keep;
            for (int i = 0; i < static_cast<int>(outs.size()); ++i)
              if (i < begin || i >= end) keep.push_back(outs[i]->name());
            if (keep.empty()) return std::nullopt;
            ir::Graph c = g.Clone();
            if (!c.SetOutputs(keep).ok()) return std::nullopt;
            return Cleaned(std::move(c));
          }};
}

}  // namespace parity::minifier
