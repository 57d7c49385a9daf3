// parity repro run DIR... | parity repro show DIR
#include <ATen/Context.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "cli/commands.h"
#include "cli/experiment_options.h"
#include "compare/same.h"
#include "distributed/replay.h"
#include "distributed/world.h"
#include "repro/graph_json.h"
#include "repro/graph_text.h"
#include "repro/repro_dir.h"
#include "util/files.h"
#include "experiment/backend.h"
#include "experiment/case.h"
#include "experiment/devices.h"
#include "experiment/experiment.h"
#include "host_ops/host_ops.h"
#include "verify/run_repro.h"
#include "runtime/worker.h"

namespace parity::cli {

namespace {

struct ReproRunArgs {
  std::vector<std::string> dirs;
  std::string backend;  // empty: eager against the stored outputs
  ExperimentArgs experiment;
  std::string dtype;
  bool equal_nan = false;
  bool no_fp64 = false;
  bool json = false;
  double collective_timeout_s = 120.0;
};

// With a backend other than eager: the verification flow on this repro dir, in this process
// (eager twice, fp64 reference, the backend, same()), e.g. to replay a minified failure.
int RunReproWithBackend(const ReproRunArgs& a, const ReproDir& repro, const experiment::ExperimentOptions& options,
                        bool json_line) {
  experiment::ExperimentSpec spec = Unwrap(experiment::Case::FromRepro(repro, a.backend, options));
  Unwrap(experiment::MakeBackend(spec.backend));
  const auto scratch = std::filesystem::temp_directory_path() / ("parity-repro-" + std::to_string(::getpid()));
  std::filesystem::create_directories(scratch);
  spec.work_dir = scratch.string();
  experiment::ExperimentResult r = experiment::RunExperiment(spec, nullptr);
  RemoveAll(scratch);
  if (a.json) {
    std::cout << r.ToJson().dump(json_line ? -1 : 2) << "\n";
  } else {
    for (const auto& o : r.outputs) {
      const auto& st = o.value("stats", nlohmann::json::object());
      std::cout << (o.value("pass", false) ? "PASS " : "FAIL ") << o.value("path", std::string()) << "  max_abs_err "
                << st.value("max_abs_err", nlohmann::json()).dump() << "  " << o.value("message", std::string()) << "\n";
    }
    std::cout << experiment::ToString(r.code) << (r.error.empty() ? "" : ": " + r.error) << "\n";
  }
  return r.code == experiment::Code::kPass ? 0 : 1;
}

// The interpreter's run of a repro dir (or of every rank of a multi-rank dir) against the stored outputs.
verify::RunReproOptions EagerOptions(const ReproRunArgs& a, const experiment::ExperimentOptions& options, const Manifest& m,
                                     const std::filesystem::path& root) {
  verify::RunReproOptions o;
  o.backend = "eager";
  if (!a.dtype.empty()) o.dtype = Unwrap(ir::ParseTorchDtype(a.dtype));
  // The dir's own device (where it was captured, or where it failed) unless --device says.
  const std::string device = options.device.value_or(m.device);  // --device was checked with the options
  if (std::string why = experiment::DeviceUnavailable(device); !why.empty())
    throw Failure{Error::BadInput((root / "manifest.json").string() + ": field \"device\" is \"" + device + "\": " + why +
                                  "; pass --device cpu to run it on the CPU")};
  o.device = c10::Device(device);
  o.same.tol = options.tol.value_or(compare::kDefaultTol);
  o.same.equal_nan = a.equal_nan;
  o.same.cos_similarity = options.cosine;
  o.fp64_reference = !a.no_fp64;
  o.while_limit = options.while_limit;
  return o;
}

// A multi-rank dir (distributed/world.h): every rank in this process, the collectives simulated;
// with a backend, the backend's run of every rank for real (a process per rank), judged against
// each rank's stored outputs with the simulated fp64 reference.
int RunWorldDir(const ReproRunArgs& a, const std::string& dir, const experiment::ExperimentOptions& options, bool json_line) {
  distributed::World world = Unwrap(distributed::World::Load(dir));
  for (int r = 0; r < world.world_size(); ++r)
    Unwrap(host_ops::PrepareHostOps(world.rank(r), options.imports, [](const nlohmann::json& req) { return runtime::AskWorker(req); }));
  verify::RunReproOptions o = EagerOptions(a, options, world.rank(0).manifest(), world.rank(0).root());
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(a.collective_timeout_s * 1000));
  distributed::WorldReport report;
  if (a.backend.empty() || a.backend == "eager") {
    report = Unwrap(distributed::RunSimulated(world, o, timeout));
  } else {
    // An unknown backend, or one without a torch.compile form: exit 2 before anything runs.
    distributed::RealRun run = Unwrap(distributed::RealRunOf(
        a.backend, experiment::OptionsFor(options.backend_options.value_or(nlohmann::json::object()), a.backend),
        o.device.str(), timeout));
    run.scratch = std::filesystem::temp_directory_path() / ("parity-world-" + std::to_string(::getpid()));
    report = Unwrap(distributed::RunWithBackend(world, o, run));
    RemoveAll(run.scratch);
  }
  std::cout << (a.json ? report.ToJson().dump(json_line ? -1 : 2) + "\n" : report.ToText());
  return report.pass ? 0 : 1;
}

// One dir; with --json, its report as one line (several dirs) or indented (one).
int RunReproDir(const ReproRunArgs& a, const std::string& dir, const experiment::ExperimentOptions& options, bool json_line) {
  if (distributed::World::IsWorldDir(dir)) return RunWorldDir(a, dir, options, json_line);
  ReproDir repro = Unwrap(ReproDir::Load(dir));
  if (!a.backend.empty() && a.backend != "eager") return RunReproWithBackend(a, repro, options, json_line);
  Unwrap(host_ops::PrepareHostOps(repro, options.imports, [](const nlohmann::json& req) { return runtime::AskWorker(req); }));
  const verify::RunReproOptions o = EagerOptions(a, options, repro.manifest(), repro.root());
  auto report = Unwrap(verify::RunRepro(repro, o));
  std::cout << (a.json ? report.ToJson().dump(json_line ? -1 : 2) + "\n" : report.ToText());
  return report.pass ? 0 : 1;
}

// Several dirs in one process (one start-up of libtorch and of the worker): each in turn, a dir's
// error reported and the next one run; with --json a line per dir, `{"dir", "error",
// "exit_status"}` for one that ended in an error. The exit status is the worst of the dirs'.
int RunReproRun(const ReproRunArgs& a) {
  const experiment::ExperimentOptions options = ToExperimentOptions(a.experiment);
  if (a.dirs.size() == 1) return RunReproDir(a, a.dirs[0], options, false);
  int worst = 0;
  for (const std::string& dir : a.dirs) {
    if (!a.json) std::cout << "== " << dir << "\n";
    int rc = 0;
    try {
      rc = RunReproDir(a, dir, options, a.json);
    } catch (const Failure& f) {
      rc = ExitStatus(f.error.kind);
      std::cerr << "parity: error: " << f.error.message << "\n";
      if (a.json) std::cout << nlohmann::json{{"dir", dir}, {"error", f.error.message}, {"exit_status", rc}}.dump() << "\n";
    }
    std::cout.flush();
    worst = std::max(worst, rc);
  }
  return worst;
}

struct ReproShowArgs {
  std::string dir;
  bool stack_traces = false;
};

// Lines calling a host op end with "  # host op".
std::string MarkHostOps(const std::string& text, const Manifest& m) {
  if (m.host_ops.empty()) return text;
  std::string out, line;
  std::istringstream in(text);
  while (std::getline(in, line)) {
    bool host = false;
    for (const auto& [name, op] : m.host_ops) host = host || line.find(" = " + name + "(") != std::string::npos;
    out += line + (host ? "  # host op" : "") + "\n";
  }
  return out;
}

int RunReproShow(const ReproShowArgs& a) {
  ReproDir repro = Unwrap(ReproDir::Load(a.dir));
  const Manifest& m = repro.manifest();
  std::cout << "# model " << m.model << " (" << m.mode << ", " << m.dtype << ", " << m.device << "), torch " << m.torch_version
            << ", " << m.producer << "\n";
  if (m.backend) std::cout << "# backend " << *m.backend << " " << m.backend_options.dump() << "\n";
  if (!m.failure.is_null()) std::cout << "# failure " << m.failure.dump() << "\n";
  for (const auto& [name, op] : m.host_ops)
    std::cout << "# host op " << name << " (runs in the Python worker; module " << (op.module.empty() ? "unknown" : op.module)
              << "): " << op.schema << "\n";
  for (const GraphEntry& g : repro.graphs()) {
    // What the program ran this graph as, where it is not the top level's (a dump of a program).
    if (g.mode != m.mode || g.dtype != m.dtype || g.device != m.device || g.has_tangents())
      std::cout << "# " << g.name << ": " << g.mode << ", " << g.dtype << (g.amp.empty() ? "" : " (autocast " + g.amp + ")") << ", "
                << g.device << (g.has_tangents() ? ", with the gradients its program's backward fed to its outputs" : "") << "\n";
    std::cout << MarkHostOps(ir::GraphToText(g.graph, a.stack_traces), m);
  }
  return 0;
}

}  // namespace

void set_repro_command(CLI::App& app, int& exit_code) {
  CLI::App* repro = app.add_subcommand("repro", "Work with a repro dir (manifest, graphs, tensors)");
  repro->require_subcommand(1);

  auto run_args = std::make_shared<ReproRunArgs>();
  CLI::App* run = repro->add_subcommand("run", "Run repro dirs and compare with the outputs stored at capture");
  run->add_option("dir", run_args->dirs, "repro dirs (several: each in turn, in one process; --json prints a line per dir)")
      ->required();
  run->add_option(
      "--backend", run_args->backend,
      "eager (default: the interpreter against the outputs stored at capture), or any backend: the verification flow");
  AddExperimentOptions(run, run_args->experiment, kBackendOptions | kDevice | kTol | kCosine | kImports | kWhileLimit);
  run->add_option("--dtype", run_args->dtype, "run floating data in this dtype (e.g. float64)");
  run->add_flag("--equal-nan", run_args->equal_nan, "NaNs in the same places compare equal");
  run->add_flag("--no-fp64", run_args->no_fp64, "skip the float64 reference (allclose only)");
  run->add_flag("--json", run_args->json, "print the report as JSON");
  run->add_option("--collective-timeout", run_args->collective_timeout_s,
                  "a multi-rank dir: seconds a collective waits for every member of its group (default 120)")
      ->check(CLI::PositiveNumber);
  run->callback([run_args, &exit_code] { exit_code = RunReproRun(*run_args); });

  auto show_args = std::make_shared<ReproShowArgs>();
  CLI::App* show = repro->add_subcommand("show", "Print the graphs of a repro dir in readable form");
  show->add_option("dir", show_args->dir, "repro dir")->required();
  show->add_flag("--stack-traces", show_args->stack_traces, "print each node's source stack trace");
  show->callback([show_args, &exit_code] { exit_code = RunReproShow(*show_args); });
}

}  // namespace parity::cli
