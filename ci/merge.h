// `parity merge OUT SHARD...`: the results of shards (results.jsonl files, or the output dirs
// holding them and their repros/) as one run: records deduplicated by fingerprint, a conflict
// (one experiment, two different codes) kept as one record whose "attempts" hold both (the gate
// sees it as flaky) and reported, repro dirs copied into OUT/repros/ and the records pointed at
// them. Gating OUT/results.jsonl gives the verdicts of an unsharded run.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "util/status.h"

namespace parity::ci {

struct MergeSummary {
  int records = 0, duplicates = 0, repros = 0;
  std::vector<std::string> conflicts;  // one line each
};

// OUT must not hold a results.jsonl already (nothing is overwritten).
[[nodiscard]] Expected<MergeSummary> Merge(const std::filesystem::path& out, const std::vector<std::filesystem::path>& inputs);

}  // namespace parity::ci
