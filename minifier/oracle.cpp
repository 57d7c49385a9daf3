#include "minifier/oracle.h"

#include "repro/graph_json.h"
#include "util/files.h"
#include "util/subprocess.h"

namespace parity::minifier {
namespace fs = std::filesystem;

Oracle::Oracle(verifier::IsolatedRunner& runner, Config config, const std::map<std::string, at::Tensor>& tensors)
    : runner_(runner), config_(std::move(config)), tensors_(tensors) {}

std::string Oracle::KeyFor(const std::string& placeholder) const {
  auto it = config_.inputs.find(placeholder);
  return it != config_.inputs.end() ? it->second : "ref/" + placeholder;
}

bool Oracle::Writable(const ir::Graph& g) const {
  for (const ir::Node* p : g.placeholders())
    if (!tensors_.count(KeyFor(p->name()))) return false;
  return !g.OutputValues().empty();
}

Status Oracle::Write(const ir::Graph& g, const fs::path& dir, const nlohmann::json& failure) const {
  GraphEntry e;
  e.name = config_.graph_name;
  e.file = "graphs/" + config_.graph_name + ".json";
  e.graph = g.Clone();
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  std::set<std::string> seen;
  auto add = [&](const std::string& key) -> Status {
    auto it = tensors_.find(key);
    if (it == tensors_.end()) return Error::Internal("minify: no value for tensor \"" + key + "\"");
    if (seen.insert(key).second) tensors.emplace_back(key, it->second);
    return Status::Ok();
  };
  for (const ir::Node* n : g.nodes()) {
    if (n->kind() == ir::NodeKind::kPlaceholder) {
      e.inputs[n->name()] = KeyFor(n->name());
      PARITY_RETURN_IF_ERROR(add(e.inputs[n->name()]));
    } else if (n->kind() == ir::NodeKind::kGetAttr) {
      PARITY_RETURN_IF_ERROR(add(n->target()));
    }
  }
  Manifest m = config_.manifest;
  m.backend = config_.base.backend;
  m.backend_options = config_.base.backend_options;
  m.failure = failure;
  m.producer = "parity minify";
  std::error_code ec;
  RemoveAll(dir);
  return WriteReproDir(dir, m, {&e}, tensors);
}

std::vector<bool> Oracle::Test(const std::vector<const ir::Graph*>& candidates) {
  std::vector<bool> out(candidates.size(), false);
  last_.assign(candidates.size(), Signature{});
  std::vector<std::pair<verifier::ExperimentSpec, fs::path>> batch;
  std::vector<size_t> which;
  std::vector<std::string> keys(candidates.size());
  for (size_t i = 0; i < candidates.size(); ++i) {
    keys[i] = ir::GraphToJson(*candidates[i]).dump();
    if (auto it = cache_.find(keys[i]); it != cache_.end()) {
      out[i] = it->second;
      ++cache_hits_;
      continue;
    }
    const fs::path dir = config_.scratch / ("cand" + std::to_string(serial_++));
    if (!Writable(*candidates[i]) || !Write(*candidates[i], dir / "repro", config_.original.ToJson()).ok()) {
      cache_[keys[i]] = false;
      continue;
    }
    verifier::ExperimentSpec spec = config_.base;
    spec.repro = fs::absolute(dir / "repro").string();
    batch.emplace_back(spec, dir / "run");
    which.push_back(i);
  }
  if (batch.empty()) return out;
  if (!config_.check_command.empty()) {
    // The user's interestingness test, llvm-reduce style: exit 0 = still interesting.
    for (size_t b = 0; b < batch.size(); ++b) {
      SpawnOptions so;
      so.env.push_back("PARITY_CANDIDATE=" + batch[b].first.repro);
      auto child = Child::Spawn({"/bin/sh", "-c", config_.check_command + " \"$PARITY_CANDIDATE\""}, so);
      ++backend_runs_;
      bool ok = child.ok() && [&] {
        ExitInfo e = child->Wait(std::chrono::seconds(config_.timeout_s));
        return e.exited && e.code == 0;
      }();
      out[which[b]] = ok;
      cache_[keys[which[b]]] = ok;
    }
    return out;
  }
  auto results = runner_.RunMany(batch);
  backend_runs_ += static_cast<int>(batch.size());
  for (size_t b = 0; b < batch.size(); ++b) {
    Signature s = Signature::FromResult(results[b]);
    last_[which[b]] = s;
    out[which[b]] = s.Matches(config_.original);
    cache_[keys[which[b]]] = out[which[b]];
  }
  return out;
}

}  // namespace parity::minifier
