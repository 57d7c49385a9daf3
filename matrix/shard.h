// Sharding the verify matrix across CI runners: which shard this process is (`--shard I/N`, or
// the environment of the engine running the job), and which experiments belong to it. Every
// shard computes the same split from the same matrix and the same costs, so the shards cover
// the matrix exactly once.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "util/status.h"

namespace parity::matrix {

struct Shard {
  int index = 0;  // 0-based; shown 1-based ("2/3")
  int count = 1;
  std::string source;  // where it came from: "--shard", "JOB_COMPLETION_INDEX", ...
  std::string Text() const { return std::to_string(index + 1) + "/" + std::to_string(count); }
};

// "I/N" with 1 <= I <= N (1-based, as CI_NODE_INDEX counts).
[[nodiscard]] Expected<Shard> ParseShard(const std::string& text);

// The environment, as a function (tests pass a map): nullptr when unset.
using GetEnv = std::function<const char*(const char*)>;

// The shard of this process, first found wins:
//   `flag` (--shard I/N);
//   Kubernetes Indexed Jobs: JOB_COMPLETION_INDEX (0-based), the count from `shards_flag`
//     (--shards N) or PARITY_SHARDS;
//   Slurm job arrays: SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN (0-based) of SLURM_ARRAY_TASK_COUNT;
//   CI matrices (GitLab `parallel:` sets them; GitHub Actions jobs set them from the matrix):
//     CI_NODE_INDEX (1-based) of CI_NODE_TOTAL.
// None: shard 1/1. A malformed or out-of-range value is kBadInput naming the variable.
[[nodiscard]] Expected<Shard> ResolveShard(const std::string& flag, int shards_flag, const GetEnv& env);

// The positions of `keys` that belong to `shard`: longest expected cost first, each to the
// least loaded shard (ties: the lower shard), keys breaking ties between equal costs, so the
// split is deterministic and balanced by cost (by count when all costs are equal).
std::vector<size_t> ShardItems(const std::vector<std::string>& keys, const std::vector<double>& costs, const Shard& shard);

// Known costs: wall_time_s by fingerprint from results.jsonl-shaped files (an earlier run, a
// merged run, a baseline's stats); unreadable lines are skipped.
std::map<std::string, double> KnownCosts(const std::vector<std::filesystem::path>& files);

// The cost of each key: its known cost, else the median of the known ones (1 when none is known).
std::vector<double> CostsFor(const std::vector<std::string>& keys, const std::map<std::string, double>& known);

}  // namespace parity::matrix
