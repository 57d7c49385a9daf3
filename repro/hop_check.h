// What a graph file alone must hold of its higher-order op calls (hop::<name>), checked once when
// it is read (GraphFromJson), so that every command refuses a bad call as bad input naming the
// graph, the node and the field, never as a verdict: the op is one parity knows; each argument
// is a subgraph exactly where the op takes one; the operands fit each subgraph's placeholders;
// the subgraphs return what the op's recorded meta says (both branches of a cond, a while
// loop's condition one boolean and its body the carried values' types, a scan's carry and
// slices, a map's slices). Meta that is not recorded is not checked; symbolic dims are compared
// only where both sides are static.
#pragma once

#include <string>
#include <vector>

#include "repro/graph.h"
#include "util/status.h"

namespace parity::ir {

// The higher-order ops parity knows (torch.ops.higher_order.<name>), in the one order every
// table of them follows (interpreter/hops.cpp runs exactly these).
const std::vector<std::string>& KnownHigherOrderOps();

// kBadInput naming `g` (and its subgraphs, recursively), the node and the field for the first
// higher-order call that cannot hold.
[[nodiscard]] Status CheckHigherOrderCalls(const Graph& g);

}  // namespace parity::ir
