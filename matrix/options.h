// What the experiment matrix is made of: models or repro dirs x backends x tests x dtypes, the
// name filter, and how each experiment runs. `parity verify`, `parity ci` and `parity profile`
// take it alike (cli/experiment_options.h declares its flags once).
#pragma once

#include <string>
#include <vector>

#include "experiment/options.h"

namespace parity::matrix {

struct MatrixOptions {
  std::vector<std::string> models;      // suite names ("all" = every model)
  std::vector<std::string> repro_dirs;  // captured repro dirs
  std::vector<std::string> backends{"inductor"};
  // Empty: the default, eval and float32 for suite models, the capture's own for a repro dir (a
  // repro dir refuses a test or dtype it was not captured in).
  std::vector<std::string> tests;
  std::vector<std::string> dtypes;
  experiment::ExperimentOptions experiment;  // how each experiment runs (device, tolerance, timeout, jobs, ...)
  std::string filter, exclude;             // regexes over model names
};

}  // namespace parity::matrix
