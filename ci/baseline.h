// The accuracy baseline a gate compares with, in PyTorch's own format so a vendor can start from
// PyTorch's files: one expected CSV per configuration (`name,accuracy,graph_breaks`, named
// ConfigName() + ".csv", e.g. PyTorch's ci_expected_accuracy/ or one of its per-device folders),
// and beside them what PyTorch keeps in code or not at all: the flaky list (flaky_models.txt,
// one model per line, '#' comments) and each experiment's error statistics and wall time
// (expected_stats.jsonl, written by --update-expected; numerics drift and shard balancing read
// it). Reads validate; writes are atomic and keep the files' row order (minimal diffs).
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "results/record.h"
#include "util/csv.h"
#include "util/status.h"

namespace parity::ci {

inline constexpr const char* kFlakyFile = "flaky_models.txt";
inline constexpr const char* kStatsFile = "expected_stats.jsonl";

using ConfigModel = std::pair<std::string, std::string>;  // (configuration, model name)

// The record each baseline row (configuration, model name) is judged and rewritten by: the last
// of that row's records (a rerun, a resumed or merged run). The gate, the update and the stats
// all ask this.
std::map<ConfigModel, const results::Record*> LatestPerRow(const std::vector<results::Record>& records);
// kBadInput where one row's records come from different programs (two repro dirs, or a repro dir
// and a suite model, under one model name: captures left with one default name): the last would
// hide the others' statuses. Names the row, its file's configuration and the programs.
[[nodiscard]] Status OneProgramPerRow(const std::vector<results::Record>& records);

class Baseline {
 public:
  // `path`: a directory of expected files, or one CSV file that is the baseline of every
  // configuration. A directory that does not exist is an empty baseline only with `create`
  // (--update-expected makes it).
  [[nodiscard]] static Expected<Baseline> Load(const std::filesystem::path& path, bool create);

  // Reads the expected files of `configs` (a configuration without one has no rows). Bad
  // content is kBadInput naming the file, line and field; a status parity does not know (one
  // PyTorch's files hold that its runner does not write, e.g. infra_error) is kept as it is,
  // compared as text, and reported in warnings().
  [[nodiscard]] Status LoadConfigs(const std::set<std::string>& configs);
  // One line per row of the loaded files whose status parity does not know, naming file and line.
  std::vector<std::string> Warnings() const;

  // The expected status of `name` in `config`; nullopt when there is no such row.
  std::optional<std::string> ExpectedStatus(const std::string& config, const std::string& name) const;
  // The model names of `config`'s rows.
  std::vector<std::string> Names(const std::string& config) const;
  bool IsFlaky(const std::string& name) const { return flaky_.count(name) > 0; }
  // The stats line of (config, name), or nullptr.
  const nlohmann::json* Stats(const std::string& config, const std::string& name) const;
  // The expected file of `config` (it may not exist yet).
  std::filesystem::path FileOf(const std::string& config) const;
  std::filesystem::path StatsPath() const { return dir_ / kStatsFile; }
  const std::filesystem::path& path() const { return path_; }

  // Rewrites the expected files and the stats from `records` (results.jsonl records): each
  // record's status (its first attempt's; a flaky one that also matched the baseline keeps the
  // baseline's) replaces or adds its row, `missing` rows are removed, other rows stay as they
  // are and where they are; new rows go before the first row that sorts after them. Returns one
  // line per file changed.
  [[nodiscard]] Expected<std::vector<std::string>> Update(const std::vector<results::Record>& records,
                                                          const std::set<ConfigModel>& missing);

 private:
  struct File {
    CsvTable table;
    int name = -1, accuracy = -1, graph_breaks = -1;  // columns
    std::map<std::string, size_t> rows;               // by model name
    std::vector<std::string> warnings;                // rows with a status parity does not know
  };
  [[nodiscard]] Expected<File> ReadExpected(const std::filesystem::path& file) const;
  [[nodiscard]] Status WriteStats(const std::vector<results::Record>& records);
  std::filesystem::path path_, dir_;
  bool single_file_ = false;
  std::map<std::string, File> files_;  // by configuration
  std::set<std::string> flaky_;
  std::map<ConfigModel, nlohmann::json> stats_;
};

}  // namespace parity::ci
