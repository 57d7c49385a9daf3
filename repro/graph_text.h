// The readable text form of a graph, stable for golden tests and shown in minify's output.
#pragma once

#include <string>

#include "repro/graph.h"

namespace parity::ir {

// The readable form: one line per node, stable for golden tests.
//   %add : f32[2, 3] = aten::add.Tensor(%x, %w, alpha=1)
std::string GraphToText(const Graph& g, bool with_stack_traces = false);
std::string ArgToText(const Arg& a);

}  // namespace parity::ir
