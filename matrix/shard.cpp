#include "matrix/shard.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <numeric>

namespace parity::matrix {

namespace {

// A whole non-negative decimal number, or -1.
long ParseCount(const std::string& s) {
  if (s.empty() || s.size() > 9 || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) return -1;
  return std::stol(s);
}

Expected<long> EnvNumber(const GetEnv& env, const char* name) {
  const char* v = env(name);
  const long n = v ? ParseCount(v) : -1;
  if (n < 0) return Error::BadInput(std::string("$") + name + "=\"" + (v ? v : "") + "\" is not a whole number");
  return n;
}

Expected<Shard> Checked(long index, long count, const std::string& source) {
  if (count < 1 || index < 0 || index >= count)
    return Error::BadInput(source + ": shard " + std::to_string(index + 1) + " of " + std::to_string(count) +
                           " is out of range (1..count)");
  return Shard{static_cast<int>(index), static_cast<int>(count), source};
}

}  // namespace

Expected<Shard> ParseShard(const std::string& text) {
  const auto slash = text.find('/');
  const long i = slash == std::string::npos ? -1 : ParseCount(text.substr(0, slash));
  const long n = slash == std::string::npos ? -1 : ParseCount(text.substr(slash + 1));
  if (i < 0 || n < 0) return Error::BadInput("--shard \"" + text + "\": expected I/N, e.g. 2/4");
  return Checked(i - 1, n, "--shard");
}

Expected<Shard> ResolveShard(const std::string& flag, int shards_flag, const GetEnv& env) {
  if (!flag.empty()) return ParseShard(flag);
  if (env("JOB_COMPLETION_INDEX")) {
    PARITY_ASSIGN_OR_RETURN(long index, EnvNumber(env, "JOB_COMPLETION_INDEX"));
    long count = shards_flag;
    if (count <= 0) {
      if (!env("PARITY_SHARDS"))
        return Error::BadInput("$JOB_COMPLETION_INDEX is set: give the number of completions with --shards N or $PARITY_SHARDS");
      PARITY_ASSIGN_OR_RETURN(count, EnvNumber(env, "PARITY_SHARDS"));
    }
    return Checked(index, count, "JOB_COMPLETION_INDEX");
  }
  if (env("SLURM_ARRAY_TASK_ID")) {
    PARITY_ASSIGN_OR_RETURN(long id, EnvNumber(env, "SLURM_ARRAY_TASK_ID"));
    PARITY_ASSIGN_OR_RETURN(long count, EnvNumber(env, "SLURM_ARRAY_TASK_COUNT"));
    long min = 0;
    if (env("SLURM_ARRAY_TASK_MIN")) {
      PARITY_ASSIGN_OR_RETURN(min, EnvNumber(env, "SLURM_ARRAY_TASK_MIN"));
    }
    return Checked(id - min, count, "SLURM_ARRAY_TASK_ID");
  }
  if (env("CI_NODE_INDEX")) {
    PARITY_ASSIGN_OR_RETURN(long index, EnvNumber(env, "CI_NODE_INDEX"));
    PARITY_ASSIGN_OR_RETURN(long total, EnvNumber(env, "CI_NODE_TOTAL"));
    return Checked(index - 1, total, "CI_NODE_INDEX");
  }
  return Shard{0, 1, ""};
}

std::vector<size_t> ShardItems(const std::vector<std::string>& keys, const std::vector<double>& costs, const Shard& shard) {
  std::vector<size_t> order(keys.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (costs[a] != costs[b]) return costs[a] > costs[b];
    return keys[a] != keys[b] ? keys[a] < keys[b] : a < b;
  });
  std::vector<double> load(static_cast<size_t>(shard.count), 0.0);
  std::vector<size_t> mine;
  for (size_t i : order) {
    const size_t least = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    load[least] += costs[i];
    if (static_cast<int>(least) == shard.index) mine.push_back(i);
  }
  std::sort(mine.begin(), mine.end());  // run in matrix order
  return mine;
}

std::map<std::string, double> KnownCosts(const std::vector<std::filesystem::path>& files) {
  std::map<std::string, double> known;
  for (const auto& file : files) {
    std::ifstream in(file);
    for (std::string line; std::getline(in, line);) {
      auto j = nlohmann::json::parse(line, nullptr, false);
      if (!j.is_object() || !j.contains("fingerprint") || !j["fingerprint"].is_string()) continue;
      const auto& m = j.contains("metrics") ? j["metrics"] : j;
      if (m.is_object() && m.contains("wall_time_s") && m["wall_time_s"].is_number())
        known[j["fingerprint"].get<std::string>()] = m["wall_time_s"].get<double>();
    }
  }
  return known;
}

std::vector<double> CostsFor(const std::vector<std::string>& keys, const std::map<std::string, double>& known) {
  std::vector<double> values;
  for (const auto& [k, v] : known) values.push_back(v);
  double fallback = 1.0;
  if (!values.empty()) {
    std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2), values.end());
    fallback = values[values.size() / 2];
  }
  std::vector<double> costs;
  for (const auto& k : keys) {
    auto it = known.find(k);
    costs.push_back(it != known.end() ? it->second : fallback);
  }
  return costs;
}

}  // namespace parity::matrix
