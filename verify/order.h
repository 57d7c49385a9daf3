// The order a verify run takes its experiments in: this shard's part of the matrix (balanced by
// the costs of earlier runs), and with several slots the longest first (the run ends when its
// longest experiment does).
#pragma once

#include <filesystem>
#include <iosfwd>
#include <vector>

#include "experiment/experiment.h"
#include "verify/experiments.h"
#include "verify/verify.h"

namespace parity::verify {

// This shard's part of `specs` (all of it without sharding); says which part on `out`.
std::vector<experiment::ExperimentSpec> SelectShard(std::vector<experiment::ExperimentSpec> specs, const VerifyOptions& o,
                                                  std::ostream& out);

// `order` (positions in `items`) sorted by each experiment's expected cost, largest first: its
// wall time in an earlier run's records (--shard-costs), else its repro dir's tensor bytes (a
// larger model takes longer to compile and run). Ties keep the matrix order.
std::vector<size_t> LongestFirst(const std::vector<Item>& items, std::vector<size_t> order,
                                 const std::vector<std::filesystem::path>& cost_files);

}  // namespace parity::verify
