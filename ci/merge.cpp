#include "ci/merge.h"

#include <map>
#include <sstream>

#include "util/files.h"
#include "util/json.h"
#include "verifier/results.h"

namespace parity::ci {
namespace fs = std::filesystem;
using nlohmann::json;

Expected<std::vector<json>> ReadRecords(const fs::path& file) {
  PARITY_ASSIGN_OR_RETURN(std::string text, ReadFile(file));
  std::vector<json> records;
  std::istringstream in(text);
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = file.string() + ":" + std::to_string(n);
    PARITY_ASSIGN_OR_RETURN(json j, ParseJson(line, where));
    if (verifier::IsProfileRecord(j)) continue;  // `parity profile`'s, not a verification
    if (std::string problem = verifier::RecordProblem(j); !problem.empty()) return Error::BadInput(where + ": " + problem);
    records.push_back(std::move(j));
  }
  return records;
}

namespace {

struct Input {
  fs::path results, dir;
};

Expected<Input> Resolve(const fs::path& p) {
  std::error_code ec;
  if (fs::is_directory(p, ec)) {
    if (!fs::exists(p / "results.jsonl")) return Error::BadInput(p.string() + ": no results.jsonl in this directory");
    return Input{p / "results.jsonl", p};
  }
  if (!fs::is_regular_file(p, ec)) return Error::BadInput(p.string() + ": no such file or directory");
  return Input{p, p.parent_path().empty() ? fs::path(".") : p.parent_path()};
}

// The repro dir a record names, found where the shard's artifacts are now: beside its
// results.jsonl (CI artifacts move), else where the record says.
fs::path FindRepro(const json& r, const Input& in) {
  const fs::path named = r.value("repro_dir", std::string());
  if (fs::is_directory(in.dir / "repros" / named.filename())) return in.dir / "repros" / named.filename();
  return named;
}

std::string Attempts(const json& r) {
  if (!r.contains("attempts")) return r["verification_code"].get<std::string>();
  std::string s;
  for (const auto& a : r["attempts"]) s += (s.empty() ? "" : ",") + a.value("verification_code", std::string("?"));
  return s;
}

json AttemptsOf(const json& r) {
  if (r.contains("attempts") && r["attempts"].is_array()) return r["attempts"];
  json a = {{"verification_code", r["verification_code"]}};
  for (const char* key : {"phase", "timed_out", "exception_type", "error"})
    if (r.contains(key)) a[key] = r[key];
  return json::array({a});
}

}  // namespace

Expected<MergeSummary> Merge(const fs::path& out, const std::vector<fs::path>& inputs) {
  if (fs::exists(out / "results.jsonl"))
    return Error::BadInput(out.string() + "/results.jsonl exists: merge into a new directory");
  MergeSummary s;
  std::vector<json> merged;
  std::map<std::string, size_t> by_fingerprint;
  std::map<std::string, std::string> origin;  // fingerprint -> input it came from
  std::vector<std::pair<size_t, fs::path>> repros;
  for (const auto& p : inputs) {
    PARITY_ASSIGN_OR_RETURN(Input in, Resolve(p));
    PARITY_ASSIGN_OR_RETURN(auto records, ReadRecords(in.results));
    for (auto& r : records) {
      const std::string fp = r["fingerprint"];
      auto it = by_fingerprint.find(fp);
      if (it == by_fingerprint.end()) {
        by_fingerprint[fp] = merged.size();
        origin[fp] = in.results.string();
        if (r.contains("repro_dir")) repros.emplace_back(merged.size(), FindRepro(r, in));
        merged.push_back(std::move(r));
        continue;
      }
      json& kept = merged[it->second];
      ++s.duplicates;
      const bool same = kept["verification_code"] == r["verification_code"];
      if (same && !r.contains("attempts")) continue;
      if (!same)
        s.conflicts.push_back(kept["model"].value("model_name", std::string()) + " " +
                              kept["experiment"].value("backend", std::string()) + " (" + fp + "): " + Attempts(kept) + " in " +
                              origin[fp] + ", " + Attempts(r) + " in " + in.results.string());
      json all = AttemptsOf(kept);  // both runs count: the gate sees a flaky experiment
      for (const auto& a : AttemptsOf(r)) all.push_back(a);
      kept["attempts"] = all;
    }
  }
  std::error_code ec;
  fs::create_directories(out / "repros", ec);
  if (ec) return Error::BadInput(out.string() + ": " + ec.message());
  std::map<std::string, int> taken;
  for (const auto& [i, src] : repros) {
    if (!fs::is_directory(src)) continue;
    std::string name = src.filename().string();
    if (taken[name]++) name += "-" + std::to_string(taken[name]);
    const fs::path dst = out / "repros" / name;
    fs::copy(src, dst, fs::copy_options::recursive | fs::copy_options::overwrite_existing, ec);
    if (ec) return Error::Runtime("cannot copy " + src.string() + " to " + dst.string() + ": " + ec.message());
    merged[i]["repro_dir"] = dst.string();
    ++s.repros;
  }
  std::string text;
  for (const auto& r : merged) text += r.dump() + "\n";
  PARITY_RETURN_IF_ERROR(WriteFileAtomic(out / "results.jsonl", text));
  s.records = static_cast<int>(merged.size());
  return s;
}

}  // namespace parity::ci
