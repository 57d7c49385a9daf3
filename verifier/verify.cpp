#include "verifier/verify.h"

#include <ATen/Context.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>

#include "repro/repro_dir.h"
#include "util/files.h"
#include "util/subprocess.h"
#include "verifier/backend.h"
#include "verifier/experiment.h"
#include "verifier/isolation.h"
#include "verifier/worker.h"

namespace parity::verifier {
namespace fs = std::filesystem;
using nlohmann::json;

fs::path DefaultCacheDir() {
  if (const char* c = std::getenv("PARITY_CACHE_DIR"); c && *c) return c;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return fs::path(x) / "parity";
  if (const char* h = std::getenv("HOME"); h && *h) return fs::path(h) / ".cache" / "parity";
  return fs::temp_directory_path() / "parity-cache";
}

int RunExperimentChild(const fs::path& spec_file, const fs::path& result_file, const fs::path& status_file) {
  auto text = ReadFile(spec_file);
  if (!text.ok()) return 2;
  auto spec = ExperimentSpec::FromJson(json::parse(*text, nullptr, false));
  if (!spec.ok()) {
    std::cerr << spec.error().message << "\n";
    return 2;
  }
  ExperimentResult r = RunExperiment(*spec, status_file);
  return WriteFileAtomic(result_file, r.ToJson().dump()).ok() ? 0 : 3;
}

namespace {

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "cpu";
}

std::string Slug(const std::string& s) {
  std::string out;
  for (char c : s) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.') ? c : '_';
  return out;
}

struct Driver {
  const VerifyOptions& o;
  std::ostream& out;
  IsolatedRunner& runner;
  std::map<std::string, std::string> device_names;

  Expected<json> Ask(const json& req) { return runner.Ask(req); }

  // A capture per (model, test, dtype, device, batch size, torch version), cached on disk.
  Expected<std::string> Capture(const std::string& model, const std::string& test, const std::string& dtype) {
    std::ostringstream key;
    key << model << "-" << test << "-" << dtype << "-" << Slug(o.device) << "-bs" << o.batch_size << "-torch"
        << Slug(PARITY_TORCH_VERSION_BUILT);
    const fs::path dir = o.cache_dir / "captures" / key.str();
    if (fs::exists(dir / "manifest.json")) return dir.string();
    std::error_code ec;
    fs::create_directories(dir.parent_path(), ec);
    const fs::path tmp = dir.string() + ".tmp" + std::to_string(::getpid());
    RemoveAll(tmp);
    json req = {{"cmd", "capture"}, {"model", model}, {"out", fs::absolute(tmp).string()}, {"mode", test},
                {"dtype", dtype}, {"device", o.device}};
    if (o.batch_size > 0) req["batch_size"] = o.batch_size;
    PARITY_ASSIGN_OR_RETURN(auto resp, Ask(req));
    (void)resp;
    fs::rename(tmp, dir, ec);
    if (ec && !fs::exists(dir / "manifest.json")) return Error::Runtime("cannot store capture in " + dir.string() + ": " + ec.message());
    return dir.string();
  }

  std::string AcceleratorModel() {
    if (o.device.rfind("cuda", 0) != 0) return CpuModel();
    if (device_names.count(o.device)) return device_names[o.device];
    auto resp = Ask({{"cmd", "ping"}});
    std::string name = resp.ok() ? resp->value("device_name", std::string("cuda")) : std::string("cuda");
    return device_names[o.device] = name;
  }

  // A repro dir for a failure: the capture plus backend, options and failure signature.
  std::string WriteFailureRepro(const ExperimentSpec& spec, const ExperimentResult& r) {
    fs::path dst = o.output_dir / "repros" / Slug(spec.model + "-" + spec.backend + "-" + spec.test + "-" + spec.dtype + "-" + spec.device);
    std::error_code ec;
    RemoveAll(dst);
    fs::create_directories(dst.parent_path(), ec);
    fs::copy(spec.repro, dst, fs::copy_options::recursive, ec);
    if (ec) return "";
    auto repro = ReproDir::Load(dst);
    if (!repro.ok()) return "";
    Manifest m = repro->manifest();
    m.backend = spec.backend;
    m.backend_options = spec.backend_options;
    json failing = json::array();
    for (const auto& v : r.outputs)
      if (!v.value("pass", true)) failing.push_back(v.value("path", std::string()));
    m.failure = {{"verification_code", ToString(r.code)},
                 {"kind", r.code == Code::kFail ? "accuracy" : "exception"},
                 {"message", r.error},
                 {"failing_outputs", failing},
                 {"tol", r.tol},
                 {"test", spec.test},
                 {"device", spec.device}};
    std::vector<const GraphEntry*> graphs;
    for (const auto& g : repro->graphs()) graphs.push_back(&g);
    if (!WriteFileAtomic(dst / "manifest.json", ManifestToJson(m, graphs).dump(2) + "\n").ok()) return "";
    return dst.string();
  }
};

std::string Fixed(double v, int prec) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(prec) << v;
  return os.str();
}

}  // namespace

Expected<VerifySummary> Verify(const VerifyOptions& opts, std::ostream& out) {
  VerifyOptions o = opts;
  if (o.cache_dir.empty()) o.cache_dir = DefaultCacheDir();
  o.cache_dir = fs::absolute(o.cache_dir);
  if (o.models.empty() && o.repro_dirs.empty()) return Error::BadInput("nothing to verify: give --model NAME or a repro dir");
  for (const auto& t : o.tests)
    if (t != "eval" && t != "train") return Error::BadInput("--test \"" + t + "\": expected eval or train");
  for (const auto& d : o.dtypes)
    if (d != "float32" && d != "float16" && d != "bfloat16" && d != "amp")
      return Error::BadInput("--dtype \"" + d + "\": expected float32, float16, bfloat16 or amp");
  for (const auto& b : o.backends) {
    auto made = MakeBackend(b);
    if (!made.ok()) return made.error();
  }
  std::optional<std::regex> filter, exclude;
  try {
    if (!o.filter.empty()) filter.emplace(o.filter);
    if (!o.exclude.empty()) exclude.emplace(o.exclude);
  } catch (const std::regex_error& e) {
    return Error::BadInput(std::string("--filter/--exclude: invalid regex: ") + e.what());
  }
  for (const auto& d : o.repro_dirs) {
    auto r = ReproDir::Load(d);  // bad input is exit 2 before anything runs
    if (!r.ok()) return r.error();
  }

  std::error_code ec;
  fs::create_directories(o.output_dir, ec);
  if (ec) return Error::BadInput("--output-dir " + o.output_dir.string() + ": " + ec.message());
  const fs::path run_dir = fs::temp_directory_path() / ("parity-verify-" + std::to_string(::getpid()));
  IsolatedRunner runner(run_dir, o.timeout_s);
  Driver d{o, out, runner, {}};

  // The suite, from the worker (it owns the model code).
  struct Item { std::string model, suite, repro, test, dtype; };
  std::vector<Item> items;
  if (!o.models.empty()) {
    PARITY_ASSIGN_OR_RETURN(auto listing, d.Ask({{"cmd", "list_models"}}));
    std::map<std::string, std::string> suite_of;
    std::vector<std::string> order;
    for (const auto& m : listing["models"]) {
      suite_of[m["name"]] = m["suite"];
      order.push_back(m["name"]);
    }
    std::vector<std::string> names;
    for (const auto& m : o.models) {
      if (m == "all") names.insert(names.end(), order.begin(), order.end());
      else if (!suite_of.count(m)) {
        std::string known;
        for (const auto& n : order) known += (known.empty() ? "" : ", ") + n;
        return Error::BadInput("--model \"" + m + "\": not in the suite (" + known + ")");
      } else names.push_back(m);
    }
    for (const auto& m : names) {
      if (filter && !std::regex_search(m, *filter)) continue;
      if (exclude && std::regex_search(m, *exclude)) continue;
      for (const auto& t : o.tests)
        for (const auto& dt : o.dtypes) items.push_back({m, suite_of[m], "", t, dt});
    }
  }
  for (const auto& dir : o.repro_dirs) {
    auto r = ReproDir::Load(dir);
    const Manifest& m = r->manifest();
    std::string suite = m.extra.value("suite", std::string("repro"));
    if (filter && !std::regex_search(m.model, *filter)) continue;
    if (exclude && std::regex_search(m.model, *exclude)) continue;
    items.push_back({m.model, suite, fs::absolute(dir).string(), m.mode, m.dtype});
  }

  VerifySummary summary;
  summary.results_file = o.output_dir / "results.jsonl";
  const auto done = DoneFingerprints(summary.results_file);
  const size_t total = items.size() * o.backends.size();
  size_t index = 0;
  std::vector<std::vector<std::string>> table;
  for (const auto& item : items) {
    std::optional<Expected<std::string>> captured;
    for (const auto& backend : o.backends) {
      ++index;
      ExperimentSpec spec;
      spec.model = item.model;
      spec.suite = item.suite;
      spec.backend = backend;
      spec.backend_options = o.backend_options;
      spec.test = item.test;
      spec.dtype = item.dtype;
      spec.device = o.device;
      spec.batch_size = o.batch_size;
      spec.repeat = o.repeat;
      spec.iterations_per_run = o.iterations_per_run;
      spec.tol = o.tol;
      spec.cosine = o.cosine;
      spec.cache_dir = o.cache_dir.string();
      if (!item.repro.empty()) spec.batch_size = 0;
      const std::string fp = spec.Fingerprint();
      const std::string label = item.model + " " + backend + " " + item.test + " " + item.dtype;
      if (done.count(fp)) {
        ++summary.resumed;
        continue;
      }
      if (o.progress) out << "\r\033[K[" << index << "/" << total << "] " << label << " ..." << std::flush;
      const auto t0 = std::chrono::steady_clock::now();
      ExperimentResult r;
      int batch_size = o.batch_size;
      const bool cuda_missing = o.device.rfind("cuda", 0) == 0 && !at::hasCUDA();
      if (cuda_missing) {
        r.code = Code::kVerifierSkipped;
        r.error = "CUDA is not available on this machine/build";
      } else if (!item.repro.empty()) {
        spec.repro = item.repro;
      } else {
        if (!captured) captured = d.Capture(item.model, item.test, item.dtype);
        if (captured->ok()) {
          spec.repro = captured->value();
          // The batch size the capture used (the model's default unless --batch-size).
          auto m = ReadFile(fs::path(spec.repro) / "manifest.json");
          auto mj = m.ok() ? json::parse(*m, nullptr, false) : json();
          if (mj.is_object() && mj.contains("batch_size") && mj["batch_size"].is_number_integer() && o.batch_size == 0)
            batch_size = mj["batch_size"].get<int>();
        }
      }
      if (cuda_missing) {
        // skipped above
      } else if (spec.repro.empty()) {
        r.code = Code::kEagerFailed;
        r.phase = "capture";
        r.error = "capture failed: " + captured->error().message;
      } else {
        r = runner.Run(spec, run_dir / ("exp" + std::to_string(index)));
      }
      const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      json line = {{"model", {{"suite_name", item.suite}, {"model_name", item.model}}},
                   {"experiment", {{"accelerator", o.device.rfind("cuda", 0) == 0 ? "cuda" : "cpu"},
                                   {"accelerator_model", d.AcceleratorModel()},
                                   {"backend", backend},
                                   {"backend_options", o.backend_options},
                                   {"test", item.test},
                                   {"batch_size", batch_size},
                                   {"dtype", item.dtype}}},
                   {"repeat", o.repeat},
                   {"iterations_per_run", o.iterations_per_run},
                   {"metrics", {{"total_time", r.total_time}, {"per_iter_time", r.per_iter_time}, {"compile_time_s", r.compile_time_s},
                                {"wall_time_s", wall}}},
                   {"timestamp", static_cast<double>(std::time(nullptr))},
                   {"verification_code", ToString(r.code)},
                   {"tolerance", r.tol},
                   {"cosine", r.cosine},
                   {"outputs", r.outputs},
                   {"fingerprint", fp}};
      if (!r.error.empty()) line["error"] = r.error;
      if (!r.phase.empty() && r.code != Code::kPass) line["phase"] = r.phase;
      if (!item.repro.empty()) line["repro_input"] = item.repro;
      if ((r.code == Code::kFail || r.code == Code::kExceptionRaised) && !spec.repro.empty()) {
        std::string repro = d.WriteFailureRepro(spec, r);
        if (!repro.empty()) line["repro_dir"] = repro;
      }
      PARITY_RETURN_IF_ERROR(AppendJsonLine(summary.results_file, line));
      summary.lines.push_back(line);
      ++summary.total;
      if (r.code == Code::kPass) ++summary.passed;
      else if (r.code == Code::kVerifierSkipped) ++summary.skipped;
      else ++summary.failed;
      double max_abs = 0;
      for (const auto& v : r.outputs)
        if (v.contains("stats") && v["stats"]["max_abs_err"].is_number())
          max_abs = std::max(max_abs, v["stats"]["max_abs_err"].get<double>());
      if (o.progress) out << "\r\033[K";
      out << "[" << index << "/" << total << "] " << label << ": " << ToString(r.code) << " (" << Fixed(wall, 1) << " s)";
      if (!r.error.empty() && r.code != Code::kPass) out << "  " << r.error.substr(0, 160);
      out << "\n" << std::flush;
      table.push_back({item.model, backend, item.test, item.dtype, ToString(r.code), Fixed(r.compile_time_s, 2),
                       r.per_iter_time.empty() ? "-" : Fixed(r.per_iter_time[0] * 1e3, 2),
                       r.outputs.empty() ? "-" : (std::ostringstream() << std::setprecision(3) << max_abs).str()});
    }
  }
  RemoveAll(run_dir);

  out << "\n";
  char line[512];
  std::snprintf(line, sizeof line, "%-12s %-28s %-6s %-9s %-27s %10s %10s %10s\n", "model", "backend", "test", "dtype", "verification_code",
                "compile_s", "iter_ms", "max_abs");
  out << line;
  for (const auto& row : table) {
    std::snprintf(line, sizeof line, "%-12s %-28s %-6s %-9s %-27s %10s %10s %10s\n", row[0].c_str(), row[1].substr(0, 28).c_str(),
                  row[2].c_str(), row[3].c_str(), row[4].c_str(), row[5].c_str(), row[6].c_str(), row[7].c_str());
    out << line;
  }
  out << summary.passed << " passed, " << summary.failed << " failed, " << summary.skipped << " skipped";
  if (summary.resumed) out << ", " << summary.resumed << " already in " << summary.results_file.string();
  out << "; results: " << summary.results_file.string() << "\n";
  return summary;
}

}  // namespace parity::verifier
