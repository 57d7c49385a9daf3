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
DeltaPass InlineSubgraphsPass();

// The higher-order calls whose subgraphs inline (cond, invoke_subgraph, tag_activation_checkpoint),
// by node name, in graph order.
std::vector<std::string> InlinableSubgraphCalls(const ir::Graph& g);
// The graph with the calls named in `calls` replaced by their subgraphs' nodes (a cond's
// outputs selected from both branches by its predicate), named after the call so every inline
// of a call names its nodes alike; nullopt when one cannot be.
std::optional<ir::Graph> InlineSubgraphs(const ir::Graph& g, const std::set<std::string>& calls);
// Every inlinable call inlined, nested ones too.
ir::Graph InlineAllSubgraphs(const ir::Graph& g);

// The graph with the op nodes in `cut` removed: values of theirs that remaining nodes (or the
// outputs) read become placeholders of the same name; what only they read dies.
std::optional<ir::Graph> CutNodes(const ir::Graph& g, const std::set<const ir::Node*>& cut);

// Every op node's metadata recomputed from the inputs' (placeholders' and get_attrs'), by running
// the graph on the CPU on zeros of their shapes; an error when an op refuses the shapes or an
// input has no metadata.
[[nodiscard]] Status PropagateMeta(ir::Graph& g);

}  // namespace parity::minifier
