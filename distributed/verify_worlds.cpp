#include "distributed/verify_worlds.h"

#include <unistd.h>

#include <chrono>
#include <ostream>
#include <set>

#include "distributed/replay.h"
#include "distributed/world.h"
#include "experiment/backend.h"
#include "experiment/case.h"
#include "experiment/devices.h"
#include "host_ops/host_ops.h"
#include "matrix/matrix.h"
#include "matrix/repro_dirs.h"
#include "results/record.h"
#include "runtime/worker.h"
#include "util/digest.h"
#include "util/files.h"
#include "verify/record.h"

namespace parity::distributed {
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// One multi-rank dir of the matrix, loaded and checked once.
struct LoadedWorld {
  std::string dir;
  World world;
  double load_s = 0.0;
};

// One world run by one backend: what every rank's record is made of.
struct WorldRun {
  const LoadedWorld* w = nullptr;
  std::string backend;
  nlohmann::json backend_options = nlohmann::json::object();
  std::string device;
  double tol = 0.0;
  Expected<WorldReport> report = Error::Internal("not run");
  double run_s = 0.0;
};

std::string ModelOf(const LoadedWorld& w) {
  const std::string& m = w.world.rank(0).manifest().model;
  return m.empty() ? fs::absolute(w.dir).lexically_normal().filename().string() : m;
}

std::string Fingerprint(const WorldRun& run, int rank) {
  return Sha256Hex(fs::absolute(run.w->dir).lexically_normal().string() + "\n" + run.backend + "\n" + run.backend_options.dump() +
                   "\n" + run.device + "\n" + std::to_string(run.tol) + "\nrank " + std::to_string(rank))
      .substr(0, 16);
}

// The collectives' timeout: half the experiment's, so that a hang outside a collective (ended at
// twice this, real.h) still ends within --timeout.
std::chrono::milliseconds CollectiveTimeout(const verify::VerifyOptions& o) {
  return std::chrono::milliseconds(static_cast<int64_t>(o.experiment.timeout_s) * 500);
}

// Runs every rank of `run.w` with `run.backend` (its judge's options `ro`, JudgeOptions): simulated
// for eager, else for real.
void Replay(WorldRun& run, const Expected<verify::RunReproOptions>& ro, const verify::VerifyOptions& o) {
  const auto t0 = Clock::now();
  const World& world = run.w->world;
  if (!ro.ok()) {
    run.report = ro.error();
    return;
  }
  if (run.backend == "eager") {
    run.report = RunSimulated(world, *ro, CollectiveTimeout(o));
  } else {
    auto real = RealRunOf(run.backend, run.backend_options, run.device, CollectiveTimeout(o));
    if (!real.ok()) {
      run.report = real.error();
    } else {
      real->scratch = fs::temp_directory_path() / ("parity-world-" + std::to_string(::getpid()));
      run.report = RunWithBackend(world, *ro, *real);
      RemoveAll(real->scratch);
    }
  }
  run.run_s = Since(t0);
}

// What a rank's record says of its train graphs: a world's replay runs each graph forward and
// judges its outputs; autograd does not run through them. Where the graph's backward was recorded
// as a graph of its own (a compiled-autograd backward; `backward_of`, a DTensor graph's), its
// outputs, the gradients, are judged; the others' gradients are not. Empty for eval.
std::string OutputsOnlyNote(const ReproDir& rank) {
  std::set<std::string> with_backward;
  for (const auto& g : rank.graphs())
    if (!g.backward_of.empty()) with_backward.insert(g.backward_of);
  std::string train, judged;
  for (const auto& g : rank.graphs()) {
    if ((g.mode.empty() ? rank.manifest().mode : g.mode) != "train") continue;
    std::string& list = with_backward.count(g.name) ? judged : train;
    list += (list.empty() ? "" : ", ") + g.name;
  }
  std::string note;
  if (!judged.empty()) note = "gradients of " + judged + " judged as their backward graphs' outputs";
  if (!train.empty())
    note += (note.empty() ? "" : "; ") + std::string("train graphs judged by their outputs only (") + train +
            "): a multi-rank replay does not run autograd through them, so the gradients computed from them are not judged";
  return note;
}

// Rank `r`'s record of `run`: its graphs' verdicts as the outputs ("<graph>/<output>"), PASS when
// every graph passed, FAIL when one failed the comparison, EXCEPTION_RAISED when one did not run
// (or the ranks' run itself failed), VERIFIER_SKIPPED when the backend cannot run ranks.
results::Record RankRecord(const WorldRun& run, int r) {
  const Manifest& m = run.w->world.rank(r).manifest();
  experiment::ExperimentSpec spec;
  spec.backend = run.backend;
  spec.suite = m.suite;
  spec.dtype = m.dtype;
  spec.test = m.mode;
  spec.device = run.device.empty() ? m.device : run.device;
  results::Record rec;
  rec.suite = m.suite;
  rec.model = ModelOf(*run.w) + ".rank" + std::to_string(r);
  rec.experiment = {spec.device.rfind("cuda", 0) == 0 ? "cuda" : "cpu", "", run.backend, run.backend_options,
                    m.mode, m.dtype, m.batch_size, verify::ConfigOfSpec(spec)};
  rec.timestamp = results::Now();
  rec.fingerprint = Fingerprint(run, r);
  rec.tolerance = run.tol;
  rec.rule = "same";
  rec.repro_input = fs::absolute(run.w->world.rank(r).root()).string();
  rec.graph_breaks = static_cast<int>(run.w->world.rank(r).graphs().size()) - 1;
  rec.distributed = results::RankOf{r, run.w->world.world_size(), run.backend == "eager" ? "simulated" : "real"};
  // Each rank's record carries the run's time (the ranks ran together): loading, the ranks' run
  // (the backend's, or the simulated one) with every rank's judge; the caller adds the record's.
  rec.metrics.phase_seconds = {{"load", run.w->load_s}, {run.backend == "eager" ? "eager" : "backend_runs", run.run_s}};
  rec.metrics.wall_time_s = run.w->load_s + run.run_s;
  if (!run.report.ok()) {
    const bool unsupported = run.report.error().kind == ErrorKind::kUnsupported;
    rec.code = unsupported ? results::Code::kVerifierSkipped : results::Code::kExceptionRaised;
    rec.phase = unsupported ? "" : "backend";
    rec.error = run.report.error().message;
    return rec;
  }
  const WorldReport& w = *run.report;
  if (!w.error.empty()) {  // a rank's process crashed or timed out: no rank's outputs to judge
    rec.code = results::Code::kExceptionRaised;
    rec.phase = "backend";
    rec.error = w.error;
    rec.timed_out = w.error.find("timed out") != std::string::npos || w.error.find("timeout") != std::string::npos;
    return rec;
  }
  const verify::ReproRunReport& mine = w.ranks.at(static_cast<size_t>(r)).report;
  bool fp64 = true, ran = true;
  for (const auto& g : mine.graphs) {
    fp64 = fp64 && g.fp64_ran;
    for (const auto& [name, v] : g.outputs) {
      nlohmann::json j = v.ToJson();
      j["path"] = g.graph + "/" + name;
      rec.outputs.push_back(std::move(j));
      if (!v.pass && rec.error.empty()) rec.error = g.graph + "/" + name + ": " + v.message;
    }
    if (!g.error.empty()) {
      ran = false;
      rec.error = g.graph + ": " + g.error;
    }
  }
  rec.code = !ran ? results::Code::kExceptionRaised : mine.pass ? results::Code::kPass : results::Code::kFail;
  if (rec.code != results::Code::kPass) rec.phase = ran ? "compare" : "backend";
  if (ran) rec.fp64_reference = fp64;
  rec.notes = OutputsOnlyNote(run.w->world.rank(r));
  return rec;
}

// The multi-rank dirs, each loaded and checked once; a bad one is set aside. The host ops of a
// world whose ranks share collectives are prepared here (its replay runs them); the ranks of one
// whose ranks share none are repro dirs verify::Verify prepares as any other.
std::vector<LoadedWorld> LoadWorlds(const std::vector<std::string>& dirs, const verify::VerifyOptions& o,
                                    std::vector<matrix::BadDir>& bad) {
  std::vector<LoadedWorld> worlds;
  for (const auto& d : dirs) {
    const auto t0 = Clock::now();
    auto w = World::Load(d);
    Status st = w.ok() ? matrix::CheckCapturedAs(w->rank(0), o) : Status(w.error());
    for (int r = 0; st.ok() && !w->groups().empty() && r < w->world_size(); ++r)
      st = host_ops::PrepareHostOps(w->rank(r), o.experiment.imports, [](const nlohmann::json& req) { return runtime::AskWorker(req); });
    if (!st.ok()) {
      bad.push_back({d, st.error()});
      continue;
    }
    worlds.push_back({d, std::move(*w), Since(t0)});
  }
  return worlds;
}

// Runs and records every world x backend of this shard (the worlds follow the plain matrix: world
// i of N belongs to shard i mod count).
Status RunWorlds(const std::vector<LoadedWorld>& worlds, const verify::VerifyOptions& o, std::ostream& out,
                 verify::VerifySummary& summary) {
  PARITY_ASSIGN_OR_RETURN(auto wanted, matrix::ModelNameFilter(o));
  const std::set<std::string> done = results::DoneFingerprints(summary.results_file);
  size_t index = 0;
  for (const auto& w : worlds) {
    for (const auto& backend : o.backends) {
      summary.matrix += w.world.world_size();
      if (static_cast<int>(index++ % static_cast<size_t>(std::max(1, o.shard.count))) != o.shard.index) continue;
      if (!wanted(ModelOf(w))) continue;
      WorldRun run;
      run.w = &w;
      run.backend = backend;
      if (o.experiment.backend_options) run.backend_options = *o.experiment.backend_options;
      const auto ro = JudgeOptions(w.world, o.experiment);
      run.device = ro.ok() ? ro->device.str() : "";
      run.tol = ro.ok() ? ro->same.tol : 0.0;
      // Resumed when every rank's record is in the results file already.
      bool all_done = true;
      for (int r = 0; r < w.world.world_size(); ++r) all_done = all_done && done.count(Fingerprint(run, r));
      if (all_done) {
        for (int r = 0; r < w.world.world_size(); ++r) summary.fingerprints.push_back(Fingerprint(run, r));
        summary.resumed += w.world.world_size();
        continue;
      }
      out << "[world] " << w.dir << " " << backend << ": " << w.world.world_size() << " ranks ...\n" << std::flush;
      Replay(run, ro, o);
      bool pass = true;
      for (int r = 0; r < w.world.world_size(); ++r) {
        const auto t0 = Clock::now();
        results::Record rec = RankRecord(run, r);
        const double reports_s = Since(t0);
        rec.metrics.phase_seconds["reports"] += reports_s;
        rec.metrics.wall_time_s += reports_s;
        PARITY_RETURN_IF_ERROR(results::AppendRecord(summary.results_file, rec));
        pass = pass && rec.code == results::Code::kPass;
        out << "  rank " << r << ": " << results::ToString(rec.code) << (rec.error.empty() ? "" : ": " + rec.error.substr(0, 200))
            << "\n";
        summary.Tally(rec.code);
        summary.fingerprints.push_back(rec.fingerprint);
        summary.records.push_back(std::move(rec));
      }
      out << "[world] " << w.dir << " " << backend << ": " << (pass ? "PASS" : "FAIL") << " (" << w.world.world_size() << " ranks, "
          << (backend == "eager" ? "simulated" : "real") << " replay, " << static_cast<int>(run.run_s + 0.5) << " s)\n";
    }
  }
  return Status::Ok();
}

}  // namespace

SplitDirs SplitWorldDirs(const std::vector<std::string>& dirs) {
  SplitDirs s;
  for (const auto& d : dirs) (World::IsWorldDir(d) ? s.worlds : s.plain).push_back(d);
  return s;
}

Expected<verify::VerifySummary> VerifyWithWorlds(const verify::VerifyOptions& options, std::ostream& out,
                                                 const verify::VerifyHooks& hooks) {
  const SplitDirs split = SplitWorldDirs(options.repro_dirs);
  if (split.worlds.empty()) return verify::Verify(options, out, hooks);
  std::vector<matrix::BadDir> bad;
  std::vector<LoadedWorld> worlds = LoadWorlds(split.worlds, options, bad);
  for (const auto& b : bad) out << "not verified: " << b.dir << ": " << b.error.message << "\n";
  // A world whose ranks share no collective (DDP's bucket graphs, FSDP2's blocks: the
  // communication is outside the graphs) is its ranks' repro dirs, each verified as any repro dir
  // is, train gradients and every backend included.
  // (Their rank dirs, read by World::Load, are handed over as read.)
  std::vector<std::string> plain_dirs = split.plain;
  std::vector<matrix::LoadedDir> ranks;
  std::vector<LoadedWorld> coupled;
  for (auto& w : worlds) {
    if (!w.world.groups().empty()) {
      coupled.push_back(std::move(w));
      continue;
    }
    out << "[world] " << w.dir << ": " << w.world.world_size() << " ranks that share no collective, each verified on its own\n";
    for (ReproDir& rank : std::move(w.world).TakeRanks()) {
      plain_dirs.push_back(rank.root().string());
      ranks.push_back({plain_dirs.back(), fs::absolute(rank.root()).string(), std::make_shared<const ReproDir>(std::move(rank))});
    }
  }
  verify::VerifySummary summary;
  if (!plain_dirs.empty() || !options.models.empty()) {
    verify::VerifyOptions plain = options;
    plain.repro_dirs = plain_dirs;
    PARITY_ASSIGN_OR_RETURN(summary, verify::Verify(plain, ranks, out, hooks));
  } else {
    PARITY_RETURN_IF_ERROR(matrix::ValidateMatrixOptions(options));
    std::error_code ec;
    fs::create_directories(options.output_dir, ec);
    if (ec) return Error::BadInput("--output-dir " + options.output_dir.string() + ": " + ec.message());
    summary.results_file = options.output_dir / "results.jsonl";
  }
  summary.bad_dirs.insert(summary.bad_dirs.end(), bad.begin(), bad.end());
  if (worlds.empty() && split.plain.empty() && options.models.empty()) return bad.front().error;
  const int before = summary.total, passed = summary.passed, resumed = summary.resumed;
  PARITY_RETURN_IF_ERROR(RunWorlds(coupled, options, out, summary));
  if (!coupled.empty())
    out << "multi-rank dirs: " << summary.total - before << " rank records, " << summary.passed - passed << " passed, "
        << summary.resumed - resumed << " resumed\n";
  return summary;
}

}  // namespace parity::distributed
