// Layouts and dtypes of values in a run: the captured layout a value gets back, and the one rule
// of a float-dtype run (the fp64 reference) for the dtypes of values. Internal to interpreter/.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <optional>
#include <vector>

#include "repro/graph.h"

namespace parity::interp::detail {

bool IsFloatingDtype(c10::ScalarType t);
// The dtype a value of dtype `t` takes in a run of floating dtype `run` (the fp64 reference): a
// floating one takes `run`, a complex one run's complex counterpart (complex64 -> complex128 in
// float64), anything else stays. The one rule inputs, dtype arguments and results all follow.
c10::ScalarType Followed(c10::ScalarType t, c10::ScalarType run);
// `v` (a tensor, or the tensors of a tuple or list) with every value in another dtype than
// Followed gives converted to it: what the graph makes with a pinned dtype (factory ops with
// dtype=None, index_put_ sources, _assert_tensor_metadata's checks) follows the run.
void FollowFloatDtype(c10::IValue& v, c10::ScalarType dtype);
// `v`'s tensors in the layouts node `n` recorded (WithCapturedLayout), where they differ.
void RelayoutValue(c10::IValue& v, const ir::Node& n);

}  // namespace parity::interp::detail
