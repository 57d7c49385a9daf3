#include "profile/profile.h"

#include <unistd.h>

#include <chrono>
#include <fstream>

#include "repro/repro_dir.h"
#include "util/csv.h"
#include "util/files.h"
#include "util/json.h"
#include "util/subprocess.h"
#include "experiment/backend.h"
#include "matrix/captures.h"
#include "experiment/case.h"
#include "experiment/runner.h"
#include "matrix/matrix.h"
#include "results/record.h"
#include "runtime/python_run.h"
#include "runtime/worker.h"
#include "runtime/worker_requests.h"

namespace parity::profile {

namespace fs = std::filesystem;
using nlohmann::json;
using experiment::ExperimentSpec;

namespace {

constexpr const char* kPerformanceCsv = "performance.csv";

// The experiment and the torch.compile backend that runs it.
struct Experiment {
  ExperimentSpec spec;
  std::string dynamo;
  std::shared_ptr<const ReproDir> repro;  // spec.repro, read once (a suite model's once captured)
};

// The one experiment the options name, through the one case mapping verify uses.
Expected<Experiment> ResolveExperiment(const ProfileOptions& o, experiment::IsolatedRunner& runner) {
  PARITY_RETURN_IF_ERROR(matrix::ValidateMatrixOptions(o.matrix));
  const matrix::LoadedDirs dirs = matrix::LoadReproDirs(o.matrix);
  if (!dirs.bad.empty()) return dirs.bad.front().error;
  PARITY_ASSIGN_OR_RETURN(auto specs, matrix::ExpandMatrix(o.matrix, dirs, [&] { return runner.Ask(runtime::requests::ListModels()); }));
  if (specs.size() != 1)
    return Error::BadInput("parity profile takes one model or repro dir, one backend, test and dtype; these options give " +
                           std::to_string(specs.size()) + " experiments");
  PARITY_ASSIGN_OR_RETURN(auto info, experiment::FindBackend(specs[0].backend));
  if (info.dynamo.empty())
    return Error::Unsupported("backend " + specs[0].backend + " (" + info.kind +
                              ") has no torch.compile form; parity profile profiles backends run through torch.compile "
                              "(parity backends lists them)");
  return Experiment{specs[0], info.dynamo, dirs.Find(specs[0].repro)};
}

// The captured repro dir of a suite model (cached, as verify caches it), read.
Status EnsureCapture(Experiment& e, const fs::path& cache_dir, experiment::IsolatedRunner& runner) {
  if (e.repro) return Status::Ok();
  matrix::CaptureCache captures(cache_dir, [&](const json& req) { return runner.Ask(req); });
  PARITY_ASSIGN_OR_RETURN(e.spec.repro, captures.Get(e.spec));
  PARITY_ASSIGN_OR_RETURN(ReproDir repro, ReproDir::Load(e.spec.repro));
  e.repro = std::make_shared<const ReproDir>(std::move(repro));
  return Status::Ok();
}

json ChildRequest(const Experiment& e, const ProfileOptions& o, const fs::path& scratch) {
  const ExperimentSpec& spec = e.spec;
  return {{"repro", fs::absolute(spec.repro).string()},
          {"backend", e.dynamo},
          {"options", spec.backend_options},
          {"device", spec.device},
          {"mode", spec.test},
          {"warmup", o.warmup},
          {"iterations", o.iterations},
          {"profile_iterations", o.profile_iterations},
          {"trace", o.trace ? json(fs::absolute(*o.trace).string()) : json()},
          {"kernel", o.kernel.empty() ? json() : json(o.kernel)},
          {"kernel_options", o.kernel_options},
          {"imports", spec.imports},
          {"scratch", scratch.string()}};
}

std::string Tail(const fs::path& log, size_t bytes) {
  auto text = ReadFile(log, uint64_t{64} << 20);
  if (!text.ok()) return "";
  return text->size() > bytes ? text->substr(text->size() - bytes) : *text;
}

// The profiling child (runtime/python_run.h: forked from the fork server while workers are kept):
// its own process group and deadline. A crash or hang there (the backend's)
// is a kRuntime error naming how it ended, with the end of its log; parity goes on.
Expected<json> RunChild(const json& request, const fs::path& scratch, int timeout_s) {
  const fs::path req = scratch / "request.json", res = scratch / "result.json", log = scratch / "profile.log";
  PARITY_RETURN_IF_ERROR(WriteFileAtomic(req, request.dump()));
  PARITY_ASSIGN_OR_RETURN(runtime::PythonRun child, runtime::PythonRun::Start("profiling", {req.string(), res.string()}, {}, log.string()));
  ExitInfo how = child.Wait(std::chrono::seconds(timeout_s));
  if (!how.exited || how.code != 0 || !fs::exists(res))
    return Error::Runtime("the profiling child (backend " + request.value("backend", "") + ") ended (" + how.Describe() +
                          ") before reporting; its log " + log.string() + " ends:\n" + Tail(log, 3000));
  PARITY_ASSIGN_OR_RETURN(std::string text, ReadFile(res));
  PARITY_ASSIGN_OR_RETURN(json result, ParseJson(text, res.string()));
  if (!result.value("ok", false)) {
    const std::string type = result.value("error_type", "");
    // --kernel naming no kernel of the compiled module: the user's input.
    Error e = type == "LookupError" ? Error::BadInput(result.value("error", "")) : Error::Runtime(result.value("error", ""));
    e.exception_type = type == "LookupError" ? "" : type;
    e.traceback = result.value("traceback", "");
    return e;
  }
  return result;
}

Status WriteOutputs(const ExperimentSpec& spec, const Report& report, const fs::path& output_dir) {
  std::error_code ec;
  fs::create_directories(output_dir, ec);
  if (ec) return Error::BadInput("--output-dir " + output_dir.string() + ": " + ec.message());
  PARITY_RETURN_IF_ERROR(AppendLine(output_dir / "results.jsonl", ProfileRecord(spec, report).dump()));
  const fs::path csv = output_dir / kPerformanceCsv;
  std::string text;
  if (fs::exists(csv)) {
    PARITY_ASSIGN_OR_RETURN(text, ReadFile(csv));
  } else {
    text = CsvLine(PerformanceCsvHeader());
  }
  return WriteFileAtomic(csv, text + CsvLine(PerformanceCsvRow(report)));
}

}  // namespace

Status CheckProfileOptions(const ProfileOptions& o) {
  if (o.warmup < 0) return Error::BadInput("--warmup " + std::to_string(o.warmup) + ": expected 0 or more");
  if (o.iterations < 1) return Error::BadInput("--iterations " + std::to_string(o.iterations) + ": expected 1 or more");
  if (o.profile_iterations < 1)
    return Error::BadInput("--profile-iterations " + std::to_string(o.profile_iterations) + ": expected 1 or more");
  if (o.top < 1) return Error::BadInput("--top " + std::to_string(o.top) + ": expected 1 or more");
  if (!o.kernel_options.empty() && o.kernel.empty()) return Error::BadInput("--kernel-option needs --kernel");
  if (o.trace) {
    const fs::path parent = fs::absolute(*o.trace).parent_path();
    if (!fs::is_directory(parent))
      return Error::BadInput("--trace " + o.trace->string() + ": no such directory " + parent.string());
  }
  return Status::Ok();
}

json ProfileRecord(const ExperimentSpec& spec, const Report& report) {
  return {{"kind", results::kProfileRecordKind},
          {"model", {{"suite_name", spec.suite}, {"model_name", spec.model}}},
          {"experiment", spec.ToJson()},
          {"profile", report.ToJson()}};
}

Expected<Report> Profile(const ProfileOptions& o, std::ostream& progress) {
  PARITY_RETURN_IF_ERROR(CheckProfileOptions(o));
  const fs::path cache_dir = fs::absolute(o.matrix.experiment.cache_dir.empty() ? experiment::DefaultCacheDir() : o.matrix.experiment.cache_dir);
  const fs::path scratch = ProcessScratchDir("parity-profile-");
  fs::create_directories(scratch);
  experiment::IsolatedRunner runner(scratch / "workers", o.matrix.experiment.timeout_s, 1);
  PARITY_ASSIGN_OR_RETURN(Experiment experiment, ResolveExperiment(o, runner));
  ExperimentSpec& spec = experiment.spec;
  progress << "profile: " << spec.model << " " << spec.backend << " " << spec.device << " " << spec.test << " " << spec.dtype
           << "\n";
  PARITY_RETURN_IF_ERROR(EnsureCapture(experiment, cache_dir, runner));
  const ReproDir& repro = *experiment.repro;
  progress << "profile: eager, then " << spec.backend << " (compile, " << o.warmup << " warm-up, " << o.iterations << " timed, "
           << o.profile_iterations << " profiled iterations)\n";
  PARITY_ASSIGN_OR_RETURN(json child, RunChild(ChildRequest(experiment, o, scratch), scratch, o.matrix.experiment.timeout_s));
  PARITY_ASSIGN_OR_RETURN(Report report, ReportOf(child, &repro.graphs().front().graph));
  report.model = spec.model;
  report.backend = spec.backend;
  report.test = spec.test;
  report.dtype = spec.dtype;
  report.batch_size = spec.batch_size != 0 ? spec.batch_size : repro.manifest().batch_size;
  PARITY_RETURN_IF_ERROR(WriteOutputs(spec, report, o.matrix.output_dir));
  RemoveAll(scratch);
  return report;
}

}  // namespace parity::profile
