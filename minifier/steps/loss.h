// Train-mode candidates: a train repro's first output is the scalar loss the backend
// differentiates (experiment/reference.cpp), so a candidate cut out of a train graph needs one too.
// The smallest differentiable path from a value to a scalar is its sum.
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
