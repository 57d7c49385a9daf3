#include "verifier/verify.h"

#include <ATen/Context.h>
#include <unistd.h>

#include <chrono>
#include <ostream>
#include <set>

#include "repro/repro_dir.h"
#include "util/files.h"
#include "verifier/captures.h"
#include "verifier/case.h"
#include "verifier/console.h"
#include "verifier/failure_repro.h"
#include "verifier/isolation.h"
#include "verifier/matrix.h"

namespace parity::verifier {
namespace fs = std::filesystem;

namespace {

// One verify run's collaborators.
struct Session {
  const VerifyOptions& o;
  IsolatedRunner& runner;
  CaptureCache captures;
  std::string accelerator;  // asked once
};

std::string AcceleratorModel(Session& s) {
  if (!s.accelerator.empty()) return s.accelerator;
  if (s.o.device.rfind("cuda", 0) != 0) return s.accelerator = CpuModel();
  auto resp = s.runner.Ask({{"cmd", "ping"}});
  return s.accelerator = resp.ok() ? resp->value("device_name", std::string("cuda")) : std::string("cuda");
}

// Captures a suite model when needed, then runs the experiment in an isolated child.
ExperimentResult RunOne(ExperimentSpec& spec, Session& s, const fs::path& dir) {
  ExperimentResult r;
  if (spec.device.rfind("cuda", 0) == 0 && !at::hasCUDA()) {
    r.code = Code::kVerifierSkipped;
    r.error = "CUDA is not available on this machine/build";
    return r;
  }
  if (spec.repro.empty()) {
    auto captured = s.captures.Get(spec);
    if (!captured.ok()) {
      const Error& e = captured.error();
      r.code = Code::kEagerFailed;
      r.phase = "capture";
      r.error = "capture failed: " + e.Text();
      return r;
    }
    spec.repro = *captured;
  }
  return s.runner.Run(spec, dir);
}

// The record of one experiment; a FAIL or EXCEPTION_RAISED also gets its repro dir.
nlohmann::json Record(const ExperimentSpec& spec, const ExperimentResult& r, bool from_repro, double wall_s, Session& s) {
  RecordContext ctx;
  ctx.accelerator_model = AcceleratorModel(s);
  ctx.wall_time_s = wall_s;
  ctx.batch_size = spec.batch_size;
  if (ctx.batch_size == 0 && !from_repro && !spec.repro.empty())
    if (auto repro = ReproDir::Load(spec.repro); repro.ok()) ctx.batch_size = repro->manifest().batch_size;
  if ((r.code == Code::kFail || r.code == Code::kExceptionRaised) && !spec.repro.empty())
    if (auto dir = WriteFailureRepro(s.o.output_dir, spec, r); dir.ok()) ctx.repro_dir = dir->string();
  if (from_repro) ctx.repro_input = spec.repro;
  return ResultRecord(spec, r, ctx);
}

void Tally(VerifySummary& summary, Code code) {
  ++summary.total;
  if (code == Code::kPass)
    ++summary.passed;
  else if (code == Code::kVerifierSkipped)
    ++summary.skipped;
  else
    ++summary.failed;
}

}  // namespace

Expected<VerifySummary> Verify(const VerifyOptions& opts, std::ostream& out) {
  VerifyOptions o = opts;
  o.cache_dir = fs::absolute(o.cache_dir.empty() ? DefaultCacheDir() : o.cache_dir);
  PARITY_RETURN_IF_ERROR(ValidateVerifyOptions(o));
  std::error_code ec;
  fs::create_directories(o.output_dir, ec);
  if (ec) return Error::BadInput("--output-dir " + o.output_dir.string() + ": " + ec.message());
  const fs::path run_dir = fs::temp_directory_path() / ("parity-verify-" + std::to_string(::getpid()));
  IsolatedRunner runner(run_dir, o.timeout_s);
  Session s{o, runner, CaptureCache(o.cache_dir, [&](const nlohmann::json& req) { return runner.Ask(req); }), ""};
  PARITY_RETURN_IF_ERROR(ImportReproHostOps(o, [&](const nlohmann::json& req) { return runner.Ask(req); }));
  PARITY_ASSIGN_OR_RETURN(auto specs, ExpandMatrix(o, [&] { return runner.Ask({{"cmd", "list_models"}}); }));

  VerifySummary summary;
  summary.results_file = o.output_dir / "results.jsonl";
  const std::set<std::string> done = DoneFingerprints(summary.results_file);
  VerifyConsole console(out, o.progress, specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    ExperimentSpec& spec = specs[i];
    if (done.count(spec.Fingerprint())) {
      ++summary.resumed;
      continue;
    }
    console.Started(i + 1, spec);
    const bool from_repro = !spec.repro.empty();
    const auto t0 = std::chrono::steady_clock::now();
    ExperimentResult r = RunOne(spec, s, run_dir / ("exp" + std::to_string(i + 1)));
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    nlohmann::json line = Record(spec, r, from_repro, wall, s);
    PARITY_RETURN_IF_ERROR(AppendJsonLine(summary.results_file, line));
    summary.lines.push_back(std::move(line));
    Tally(summary, r.code);
    console.Finished(i + 1, spec, r, wall);
  }
  RemoveAll(run_dir);
  console.Summary(summary);
  return summary;
}

}  // namespace parity::verifier
