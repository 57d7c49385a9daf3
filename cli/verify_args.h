// The options `parity verify` and `parity ci` share (the matrix, isolation, sharding), declared
// once: AddVerifyOptions on a subcommand, ToVerifyOptions after parsing.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "verifier/verify.h"

namespace parity::cli {

struct VerifyArgs {
  std::vector<std::string> dirs, models, backends{"inductor"}, backend_options, tests, dtypes, imports, shard_costs;
  std::string device, filter, exclude, output_dir = "parity-results", cache_dir, shard;
  int batch_size = 0, repeat = 1, iterations = 1, timeout = 1800, jobs = 1, shards = 0;
  double tol = 0;
  bool tol_given = false, cosine = false;
};

void AddVerifyOptions(CLI::App* cmd, VerifyArgs& a);
// Throws Failure on bad input (exit 2); the shard comes from --shard or the environment.
verifier::VerifyOptions ToVerifyOptions(const VerifyArgs& a);

}  // namespace parity::cli
