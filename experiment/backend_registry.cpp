// The one explicit table of backends. A new backend is one file in backends/ plus one line here.
#include <ATen/ops/empty.h>

#include "repro/safetensors.h"
#include "experiment/backend.h"
#include "experiment/backends/backends.h"

namespace parity::experiment {

namespace {

struct Entry {
  BackendInfo info;
  std::unique_ptr<Backend> (*make)(const std::string& name);
};

const std::vector<Entry>& Table() {
  // name, description, kind, needs_worker, train, dynamo, symbolic
  static const std::vector<Entry> table = {
      {{"eager", "parity's C++ interpreter over ATen (the reference itself)", "c++", false, true, "eager", true},
       [](const std::string&) { return MakeEagerBackend(); }},
      {{"aot_eager", "AOTAutograd's graph (functionalized), made in the worker, run by the interpreter", "python worker + c++",
        true, true, "aot_eager", true},
       [](const std::string& n) { return MakeAotAutogradBackend(n); }},
      {{"aot_eager_decomp_partition", "as aot_eager, with Inductor's decompositions and the min-cut partitioner",
        "python worker + c++", true, true, "aot_eager_decomp_partition", true},
       [](const std::string& n) { return MakeAotAutogradBackend(n); }},
      {{"inductor", "torch.compile with TorchInductor, in the persistent Python worker", "python worker", true, true, "inductor", true},
       [](const std::string&) { return MakeWorkerBackend("inductor"); }},
      {{"aot_inductor", "AOTInductor package compiled once (cached), loaded and run in C++", "python worker + c++", true, false,
        ""},
       [](const std::string&) { return MakeAotInductorBackend(); }},
      {{"nativert", "torch.export package run by libtorch's NativeRT", "python worker + c++", true, false, ""},
       [](const std::string&) { return MakeNativeRTBackend(); }},
      {{"torchscript", "TorchScript trace run by libtorch's JIT (legacy path)", "python worker + c++", true, false, ""},
       [](const std::string&) { return MakeTorchScriptBackend(); }},
      {{"torch_compile:<name>", "any dynamo backend registered in the worker's torch (vendor backends)", "python worker", true,
        true, "<name>", true},
       [](const std::string& n) { return MakeWorkerBackend(n.substr(std::string("torch_compile:").size())); }},
      {{"fault", "fault injection: op=<aten op> kind=perturb|nan|raise|segfault|abort|hang|oom", "c++", false, true, "", true},
       [](const std::string&) { return MakeFaultBackend(); }},
  };
  return table;
}

// The entry answering for `name`, or null.
const Entry* Lookup(const std::string& name) {
  for (const auto& e : Table()) {
    const std::string& n = e.info.name;
    const auto lt = n.find('<');
    const bool prefix = lt != std::string::npos;
    if ((!prefix && n == name) || (prefix && name.size() > lt && name.compare(0, lt, n, 0, lt) == 0)) return &e;
  }
  return nullptr;
}

Error Unknown(const std::string& name) {
  std::string known;
  for (const auto& e : Table()) known += (known.empty() ? "" : ", ") + e.info.name;
  return Error::BadInput("unknown backend \"" + name + "\"; known: " + known);
}

}  // namespace

const std::vector<BackendInfo>& Backends() {
  static const std::vector<BackendInfo> infos = [] {
    std::vector<BackendInfo> v;
    for (const auto& e : Table()) v.push_back(e.info);
    return v;
  }();
  return infos;
}

Expected<std::unique_ptr<Backend>> MakeBackend(const std::string& name) {
  const Entry* e = Lookup(name);
  if (!e) return Unknown(name);
  return e->make(name);
}

Expected<BackendInfo> FindBackend(const std::string& name) {
  const Entry* e = Lookup(name);
  if (!e) return Unknown(name);
  BackendInfo info = e->info;
  if (info.dynamo == "<name>") info.dynamo = name.substr(info.name.find('<'));
  return info;
}

std::string WarmDevice(const std::vector<std::string>& backends, const std::string& device) {
  for (const auto& b : backends) {
    auto info = FindBackend(b);
    if (!info.ok() || (info->needs_worker && !info->dynamo.empty())) return device;
  }
  return "";
}

std::string OutputName(size_t k) { return "output/" + std::to_string(k); }

Expected<NamedTensors> LoadNamed(const std::filesystem::path& file) {
  PARITY_ASSIGN_OR_RETURN(auto all, safetensors::LoadAll(file));
  // Keep the order the producer wrote (safetensors sorts by offset = write order for parity's and
  // the safetensors package's writers).
  return NamedTensors(all.begin(), all.end());
}

namespace {

// A scoped key's backend ("inductor" of "inductor:max_autotune"; the last colon splits, as
// backend names may hold one), or "" for a key every backend gets.
std::string ScopeOf(const std::string& key) {
  const auto colon = key.rfind(':');
  return colon == std::string::npos ? "" : key.substr(0, colon);
}

}  // namespace

Expected<nlohmann::json> ParseBackendOptions(const std::vector<std::string>& specs, const std::string& flag) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& s : specs) {
    const std::string named = flag + " \"" + s + "\": ";
    auto eq = s.find('=');
    if (eq == std::string::npos || eq == 0) return Error::BadInput(named + "expected [BACKEND:]KEY=VALUE");
    const std::string key = s.substr(0, eq), scope = ScopeOf(key);
    if (!scope.empty()) {
      if (key.size() == scope.size() + 1) return Error::BadInput(named + "no KEY after " + scope + ":");
      if (auto info = FindBackend(scope); !info.ok()) return Error::BadInput(named + info.error().message);
    }
    j[key] = s.substr(eq + 1);
  }
  return j;
}

nlohmann::json OptionsFor(const nlohmann::json& options, const std::string& backend) {
  nlohmann::json mine = nlohmann::json::object();
  if (!options.is_object()) return mine;
  for (const auto& [key, value] : options.items())
    if (ScopeOf(key).empty()) mine[key] = value;
  for (const auto& [key, value] : options.items())  // a backend's own over the ones for all
    if (const std::string scope = ScopeOf(key); !scope.empty() && scope == backend) mine[key.substr(scope.size() + 1)] = value;
  return mine;
}

}  // namespace parity::experiment
