// Train-mode candidates whose values have no known gradient (CandidateWriter: the original's
// backward could not run in the interpreter, or a value's gradient does not fit its shape): a
// train repro without tangents has the scalar loss the backend differentiates as its first
// output (experiment/reference.cpp), and the smallest differentiable path from values to a
// scalar is their sum.
#pragma once

#include <string>
#include <vector>

#include "repro/graph.h"
#include "util/status.h"

namespace parity::minifier {

// `g` returning [loss, values...], where loss = sum(values[0]) + sum(values[1]) + ... over the
// floating ones (aten::sum, then aten::add.Tensor); an error when none is floating.
[[nodiscard]] Expected<ir::Graph> WithSumLoss(const ir::Graph& g, const std::vector<std::string>& values);

}  // namespace parity::minifier
