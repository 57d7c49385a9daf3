// Factories of the delta passes listed in passes.def, one file each.
#pragma once

#include "minifier/delta.h"

namespace parity::minifier {

DeltaPass ReplaceWithPlaceholdersPass();
DeltaPass RemoveOutputsPass();
DeltaPass EliminateDeadCodePass();
DeltaPass ConsolidateInputsPass();
DeltaPass CollapseDimsPass();
DeltaPass ShrinkShapesPass();

// The graph with the op nodes in `cut` removed: values of theirs that remaining nodes (or the
// outputs) read become placeholders of the same name; what only they read dies.
std::optional<ir::Graph> CutNodes(const ir::Graph& g, const std::set<const ir::Node*>& cut);

// Every op node's metadata recomputed from the inputs' (placeholders' and get_attrs'), by running
// the graph on the CPU on zeros of their shapes; an error when an op refuses the shapes or an
// input has no metadata.
[[nodiscard]] Status PropagateMeta(ir::Graph& g);

}  // namespace parity::minifier
