#include "ci/baseline.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "results/statuses.h"
#include "util/files.h"

namespace parity::ci {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string Trim(std::string s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

Expected<std::set<std::string>> ReadFlaky(const fs::path& file) {
  std::set<std::string> names;
  if (!fs::exists(file)) return names;
  PARITY_ASSIGN_OR_RETURN(std::string text, ReadFile(file));
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    line = Trim(line.substr(0, line.find('#')));
    if (!line.empty()) names.insert(line);
  }
  return names;
}

Expected<std::map<ConfigModel, json>> ReadStats(const fs::path& file) {
  std::map<ConfigModel, json> stats;
  if (!fs::exists(file)) return stats;
  PARITY_ASSIGN_OR_RETURN(std::string text, ReadFile(file));
  std::istringstream in(text);
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    if (Trim(line).empty()) continue;
    json j = json::parse(line, nullptr, false);
    if (!j.is_object() || !j.contains("config") || !j["config"].is_string() || !j.contains("name") || !j["name"].is_string())
      return Error::BadInput(file.string() + ":" + std::to_string(n) +
                             ": expected a JSON object with string fields config and name");
    stats[{j["config"].get<std::string>(), j["name"].get<std::string>()}] = j;
  }
  return stats;
}

// What the baseline keeps of a record: its error statistics per output and its wall time.
json StatsLine(const std::string& config, const results::Record& r) {
  json outputs = json::array();
  for (const auto& o : r.outputs) {
    if (!o.contains("stats") || !o["stats"].is_object()) continue;
    const json& s = o["stats"];
    outputs.push_back({{"path", o.value("path", std::string())},
                       {"rmse_res_vs_fp64", s.value("rmse_res_vs_fp64", json())},
                       {"max_abs_err", s.value("max_abs_err", json())}});
  }
  return {{"config", config},         {"name", r.model},
          {"fingerprint", r.fingerprint}, {"status", results::StatusOf(r)},
          {"tolerance", r.tolerance},    {"wall_time_s", r.metrics.wall_time_s},
          {"outputs", outputs}};
}

// The status --update-expected writes for a record.
std::string NewStatus(const results::Record& r, const std::optional<std::string>& expected) {
  if (expected)
    for (const auto& a : r.attempts)
      if (results::StatusOf(a) == *expected) return *expected;  // flaky: keep the baseline
  return results::StatusOf(r);
}

}  // namespace

Expected<Baseline> Baseline::Load(const fs::path& path, bool create) {
  Baseline b;
  b.path_ = path;
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) {
    b.single_file_ = true;
    b.dir_ = path.parent_path().empty() ? fs::path(".") : path.parent_path();
  } else if (fs::is_directory(path, ec)) {
    b.dir_ = path;
  } else if (create) {
    b.single_file_ = path.extension() == ".csv";
    b.dir_ = b.single_file_ ? (path.parent_path().empty() ? fs::path(".") : path.parent_path()) : path;
  } else {
    return Error::BadInput("--expected " + path.string() +
                           ": no such file or directory (create the baseline with --update-expected)");
  }
  PARITY_ASSIGN_OR_RETURN(b.flaky_, ReadFlaky(b.dir_ / kFlakyFile));
  PARITY_ASSIGN_OR_RETURN(b.stats_, ReadStats(b.dir_ / kStatsFile));
  return b;
}

fs::path Baseline::FileOf(const std::string& config) const { return single_file_ ? path_ : dir_ / (config + ".csv"); }

Expected<Baseline::File> Baseline::ReadExpected(const fs::path& file) const {
  File f;
  if (!fs::exists(file)) {
    f.table.header = {"name", "accuracy", "graph_breaks"};
    f.name = 0, f.accuracy = 1, f.graph_breaks = 2;
    return f;
  }
  PARITY_ASSIGN_OR_RETURN(f.table, ReadCsv(file));
  f.name = f.table.Column("name");
  f.accuracy = f.table.Column("accuracy");
  f.graph_breaks = f.table.Column("graph_breaks");
  for (const char* col : {"name", "accuracy"})
    if (f.table.Column(col) < 0) return Error::BadInput(file.string() + ": header has no \"" + col + "\" column");
  for (size_t i = 0; i < f.table.rows.size(); ++i) {
    const auto& row = f.table.rows[i];
    const std::string where = file.string() + ":" + std::to_string(f.table.lines[i]);
    const std::string& status = row[static_cast<size_t>(f.accuracy)];
    if (status.empty()) return Error::BadInput(where + ": field \"accuracy\" is empty");
    if (!results::IsKnownStatus(status))
      f.warnings.push_back(where + ": accuracy \"" + status + "\" is not a status parity knows; compared as text (a record's " +
                           "status never equals it, so the row is FAIL, or IMPROVED where the record passes)");
    if (!f.rows.emplace(row[static_cast<size_t>(f.name)], i).second)
      return Error::BadInput(where + ": name \"" + row[static_cast<size_t>(f.name)] + "\" appears twice");
  }
  return f;
}

std::vector<std::string> Baseline::Warnings() const {
  std::vector<std::string> out;
  for (const auto& [config, f] : files_) out.insert(out.end(), f.warnings.begin(), f.warnings.end());
  return out;
}

Status Baseline::LoadConfigs(const std::set<std::string>& configs) {
  for (const auto& c : configs) {
    if (files_.count(c)) continue;
    PARITY_ASSIGN_OR_RETURN(File f, ReadExpected(FileOf(c)));
    files_.emplace(c, std::move(f));
  }
  return Status::Ok();
}

std::optional<std::string> Baseline::ExpectedStatus(const std::string& config, const std::string& name) const {
  auto f = files_.find(config);
  if (f == files_.end()) return std::nullopt;
  auto r = f->second.rows.find(name);
  if (r == f->second.rows.end()) return std::nullopt;
  return f->second.table.rows[r->second][static_cast<size_t>(f->second.accuracy)];
}

std::vector<std::string> Baseline::Names(const std::string& config) const {
  std::vector<std::string> names;
  auto f = files_.find(config);
  if (f != files_.end())
    for (const auto& [name, row] : f->second.rows) names.push_back(name);
  return names;
}

const json* Baseline::Stats(const std::string& config, const std::string& name) const {
  auto it = stats_.find({config, name});
  return it == stats_.end() ? nullptr : &it->second;
}

std::map<ConfigModel, const results::Record*> LatestPerRow(const std::vector<results::Record>& records) {
  std::map<ConfigModel, const results::Record*> latest;
  for (const auto& r : records) latest[{results::ConfigOf(r), r.model}] = &r;
  return latest;
}

Status OneProgramPerRow(const std::vector<results::Record>& records) {
  // A program is its repro dir (as a normal path, no trailing separator), or the suite model of its name.
  auto program = [](const results::Record& r) {
    if (r.repro_input.empty()) return "the suite model " + r.model;
    const fs::path p = fs::path(r.repro_input).lexically_normal();
    return (p.has_filename() ? p : p.parent_path()).string();
  };
  std::map<ConfigModel, std::string> first;
  for (const auto& r : records) {
    const ConfigModel row{results::ConfigOf(r), r.model};
    const std::string this_one = program(r);
    auto [it, added] = first.emplace(row, this_one);
    if (!added && it->second != this_one)
      return Error::BadInput("the baseline row \"" + r.model + "\" of " + row.first + " would hold two programs, " + it->second +
                             " and " + this_one + ": a row is one program; capture each under a name of its own "
                             "(dump_backend(out, \"name\"), capture(..., name=...), or the manifest's \"model\")");
  }
  return Status::Ok();
}

Expected<std::vector<std::string>> Baseline::Update(const std::vector<results::Record>& records,
                                                   const std::set<ConfigModel>& missing) {
  const auto latest = LatestPerRow(records);
  std::map<std::string, std::vector<const results::Record*>> by_config;
  for (const auto& [key, r] : latest) by_config[key.first].push_back(r);
  if (single_file_ && by_config.size() > 1) {
    std::string names;
    for (const auto& [c, rs] : by_config) names += " " + c;
    return Error::BadInput("--expected " + path_.string() + " is one file, but the results hold " +
                           std::to_string(by_config.size()) + " configurations (" + names.substr(1) +
                           "): give a directory, which gets one file per configuration");
  }
  std::set<std::string> configs;
  for (const auto& [c, rs] : by_config) configs.insert(c);
  for (const auto& [c, n] : missing) configs.insert(c);
  PARITY_RETURN_IF_ERROR(LoadConfigs(configs));
  std::vector<std::string> changes;
  std::error_code ec;
  fs::create_directories(dir_, ec);
  for (const auto& c : configs) {
    File& f = files_[c];
    const size_t width = f.table.header.size();
    int changed = 0, added = 0, removed = 0;
    std::vector<std::vector<std::string>> rows = f.table.rows;
    std::vector<bool> drop(rows.size(), false);
    for (const auto& [mc, name] : missing)
      if (mc == c && f.rows.count(name)) {
        drop[f.rows[name]] = true;
        ++removed;
      }
    std::vector<std::vector<std::string>> added_rows;
    for (const results::Record* r : by_config[c]) {
      const std::string& name = r->model;
      const std::string status = NewStatus(*r, ExpectedStatus(c, name));
      const std::string breaks = r->graph_breaks ? std::to_string(*r->graph_breaks) : "";
      auto it = f.rows.find(name);
      if (it != f.rows.end()) {
        auto& row = rows[it->second];
        if (row[static_cast<size_t>(f.accuracy)] != status) ++changed;
        row[static_cast<size_t>(f.accuracy)] = status;
        if (f.graph_breaks >= 0 && !breaks.empty()) row[static_cast<size_t>(f.graph_breaks)] = breaks;
        continue;
      }
      std::vector<std::string> row(width);
      row[static_cast<size_t>(f.name)] = name;
      row[static_cast<size_t>(f.accuracy)] = status;
      if (f.graph_breaks >= 0) row[static_cast<size_t>(f.graph_breaks)] = breaks.empty() ? "0" : breaks;
      added_rows.push_back(row);
      ++added;
    }
    CsvTable out;
    out.header = f.table.header;
    for (size_t i = 0; i < rows.size(); ++i)
      if (!drop[i]) out.rows.push_back(rows[i]);
    std::sort(added_rows.begin(), added_rows.end(),
              [&](const auto& a, const auto& b) { return a[static_cast<size_t>(f.name)] < b[static_cast<size_t>(f.name)]; });
    for (auto& row : added_rows) {
      auto pos = std::find_if(out.rows.begin(), out.rows.end(),
                              [&](const auto& r) { return r[static_cast<size_t>(f.name)] > row[static_cast<size_t>(f.name)]; });
      out.rows.insert(pos, row);
    }
    const fs::path file = FileOf(c);
    const bool existed = fs::exists(file);
    if (changed + added + removed == 0 && existed) continue;
    PARITY_RETURN_IF_ERROR(WriteFileAtomic(file, CsvText(out)));
    changes.push_back((existed ? "updated " : "created ") + file.string() + ": " + std::to_string(changed) + " changed, " +
                      std::to_string(added) + " added, " + std::to_string(removed) + " removed");
    files_.erase(c);
  }
  for (const auto& m : missing) stats_.erase(m);
  PARITY_RETURN_IF_ERROR(WriteStats(records));
  PARITY_RETURN_IF_ERROR(LoadConfigs(configs));
  return changes;
}

Status Baseline::WriteStats(const std::vector<results::Record>& records) {
  for (const auto& [row, r] : LatestPerRow(records)) stats_[row] = StatsLine(row.first, *r);
  std::string text;
  for (const auto& [key, line] : stats_) text += line.dump() + "\n";
  return WriteFileAtomic(StatsPath(), text);
}

}  // namespace parity::ci
