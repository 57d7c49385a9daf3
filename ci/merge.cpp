#include "ci/merge.h"

#include <map>
#include <sstream>

#include "util/files.h"
#include "util/json.h"
#include "results/record.h"

namespace parity::ci {
namespace fs = std::filesystem;
using nlohmann::json;

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
fs::path FindRepro(const results::Record& r, const Input& in) {
  const fs::path named = r.repro_dir;
  if (fs::is_directory(in.dir / "repros" / named.filename())) return in.dir / "repros" / named.filename();
  return named;
}

std::string Codes(const results::Record& r) {
  std::string s;
  for (const auto& a : r.AllAttempts()) s += (s.empty() ? "" : ",") + std::string(results::ToString(a.code));
  return s;
}

}  // namespace

Expected<MergeSummary> Merge(const fs::path& out, const std::vector<fs::path>& inputs) {
  if (fs::exists(out / "results.jsonl"))
    return Error::BadInput(out.string() + "/results.jsonl exists: merge into a new directory");
  MergeSummary s;
  std::vector<results::Record> merged;
  std::map<std::string, size_t> by_fingerprint;
  std::map<std::string, std::string> origin;  // fingerprint -> input it came from
  std::vector<std::pair<size_t, fs::path>> repros;
  for (const auto& p : inputs) {
    PARITY_ASSIGN_OR_RETURN(Input in, Resolve(p));
    PARITY_ASSIGN_OR_RETURN(auto records, results::ReadRecords(in.results, results::ReadMode::kStrict));
    for (auto& r : records) {
      const std::string fp = r.fingerprint;
      auto it = by_fingerprint.find(fp);
      if (it == by_fingerprint.end()) {
        by_fingerprint[fp] = merged.size();
        origin[fp] = in.results.string();
        if (!r.repro_dir.empty()) repros.emplace_back(merged.size(), FindRepro(r, in));
        merged.push_back(std::move(r));
        continue;
      }
      results::Record& kept = merged[it->second];
      ++s.duplicates;
      const bool same = kept.code == r.code;
      if (same && r.attempts.empty()) continue;
      if (!same)
        s.conflicts.push_back(kept.model + " " + kept.experiment.backend + " (" + fp + "): " + Codes(kept) + " in " + origin[fp] + ", " +
                              Codes(r) + " in " + in.results.string());
      std::vector<results::Attempt> all = kept.AllAttempts();  // both runs count: the gate sees a flaky experiment
      for (const auto& a : r.AllAttempts()) all.push_back(a);
      kept.attempts = std::move(all);
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
    merged[i].repro_dir = dst.string();
    ++s.repros;
  }
  std::string text;
  for (const auto& r : merged) text += r.ToJson().dump() + "\n";
  PARITY_RETURN_IF_ERROR(WriteFileAtomic(out / "results.jsonl", text));
  s.records = static_cast<int>(merged.size());
  return s;
}

}  // namespace parity::ci
