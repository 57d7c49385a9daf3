// `parity repro run`: runs every graph of a repro dir on its captured inputs and checks the
// outputs against the eager outputs stored at capture, with same() semantics (the fp64
// reference comes from the interpreter's float64 mode), except that the fp64 rule cannot pass
// an output allclose fails: that reference is recomputed from the same tensors, so corrupted
// data would excuse itself (the manifest's tensors_sha256 catches it first).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>
#include <nlohmann/json.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compare/same.h"
#include "interpreter/collectives.h"
#include "repro/repro_dir.h"
#include "util/status.h"

namespace parity::verify {

struct RunReproOptions {
  std::string backend = "eager";
  std::optional<c10::ScalarType> dtype;  // run floating data in this dtype (outputs cast back to compare)
  c10::Device device{c10::kCPU};
  compare::SameOptions same;
  bool fp64_reference = true;
  int64_t while_limit = 0;  // interp::RunOptions::while_limit
  std::shared_ptr<interp::Collectives> collectives;  // interp::RunOptions::collectives (one rank of a multi-rank dir)
  // Outputs under test in place of the interpreter's eager run (a backend's, run elsewhere):
  // graph index -> its outputs in output order (a Runtime error is the graph's failure). The
  // stored outputs are then the reference, and the fp64 reference (still the interpreter's) may
  // excuse a difference as same() allows.
  std::function<Expected<std::vector<at::Tensor>>(size_t graph)> under_test;
};

struct GraphRunReport {
  std::string graph;
  bool pass = false;
  std::string error;       // a runtime failure of the run, if any
  bool fp64_ran = false;   // the float64 reference ran (it then backs same()'s RMSE rule)
  std::string fp64_error;  // why it did not run, when it was asked for
  int64_t num_ops = 0;
  double run_ms = 0.0;
  int64_t bitwise_equal = 0;  // outputs identical to the stored ones
  std::vector<std::pair<std::string, compare::Verdict>> outputs;
};

struct ReproRunReport {
  bool pass = true;
  std::vector<GraphRunReport> graphs;
  nlohmann::json ToJson() const;
  std::string ToText() const;
};

// BadInput when the repro dir cannot be run at all (unknown op, argument/schema mismatch,
// no stored outputs, unknown backend); runtime failures are reported in the result.
[[nodiscard]] Expected<ReproRunReport> RunRepro(const ReproDir& repro, const RunReproOptions& options);

}  // namespace parity::verify
