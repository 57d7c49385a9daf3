#include "minifier/across_ranks.h"

#include <chrono>
#include <fstream>
#include <functional>
#include <map>
#include <ostream>

#include "distributed/isolate.h"
#include "distributed/replay.h"
#include "experiment/case.h"
#include "interpreter/collectives.h"
#include "minifier/delta.h"
#include "minifier/interesting.h"
#include "minifier/reduction.h"
#include "minifier/steps/steps.h"
#include "minifier/signature.h"
#include "repro/graph_text.h"
#include "runtime/worker.h"
#include "util/files.h"

namespace parity::minifier {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using Report = Expected<distributed::WorldReport>;

// Ok when every rank holds the same graphs, each graph's text the same on every rank (a candidate
// is then one edit that every rank's graph takes alike); else Unsupported naming the first that differs.
Status SameGraphs(const distributed::World& world) {
  const auto& lead = world.rank(0).graphs();
  for (int r = 1; r < world.world_size(); ++r) {
    const auto& mine = world.rank(r).graphs();
    if (mine.size() != lead.size())
      return Error::Unsupported("rank " + std::to_string(r) + " has " + std::to_string(mine.size()) + " graphs, rank 0 " +
                                std::to_string(lead.size()));
    for (size_t gi = 0; gi < lead.size(); ++gi)
      if (ir::GraphToText(mine[gi].graph) != ir::GraphToText(lead[gi].graph))
        return Error::Unsupported("rank " + std::to_string(r) + "'s graph " + mine[gi].name + " is not rank 0's");
  }
  return Status::Ok();
}

std::vector<std::string> CollectivesIn(const ir::Graph& g) {
  std::vector<std::string> out;
  for (const ir::Node* n : g.nodes())
    if (n->kind() == ir::NodeKind::kCallFunction && interp::IsCollective(n->OperatorName().first)) out.push_back(n->target());
  return out;
}

// One graph of the world reduced: each rank's writer (its tensors and its replay's values), a
// candidate written as a multi-rank dir of that graph alone on every rank, judged by a real run.
class WorldTest final : public Interestingness {
 public:
  using Run = std::function<Report(const distributed::World&)>;
  WorldTest(const distributed::World& world, const distributed::ReplayValues& values, size_t gi, const std::string& backend,
            const json& backend_options, Run run, fs::path scratch)
      : world_(world), run_(std::move(run)), scratch_(std::move(scratch)) {
    pools_.resize(static_cast<size_t>(world.world_size()));
    for (int r = 0; r < world.world_size(); ++r) {
      const ReproDir& repro = world.rank(r);
      auto& pool = pools_[static_cast<size_t>(r)];
      for (const auto& info : repro.tensors().tensors()) pool[info.name] = *repro.tensors().Get(info.name);
      for (const auto& [name, v] : values[static_cast<size_t>(r)][gi])
        if (v.isTensor()) pool["ref/" + name] = v.toTensor().detach().to(at::kCPU);
    }
    for (int r = 0; r < world.world_size(); ++r) {
      Manifest m = world.rank(r).manifest();
      m.backend = backend;
      m.backend_options = backend_options;
      writers_.emplace_back(m, world.rank(r).graphs()[gi], pools_[static_cast<size_t>(r)]);
      writers_.back().StoreReferenceOutputs();
    }
  }

  void Expect(WorldFailure original) { original_ = std::move(original); }

  // `g` on every rank as a multi-rank dir at `dir` (replaced).
  Status Write(const ir::Graph& g, const fs::path& dir) const {
    RemoveAll(dir);
    json top = {{"format", distributed::kWorldFormat}, {"version", distributed::kWorldFormatVersion},
                {"world_size", world_.world_size()}, {"ranks", json::array()}};
    for (size_t r = 0; r < writers_.size(); ++r) {
      if (!writers_[r].Writable(g)) return Error::Internal("minify: a candidate rank " + std::to_string(r) + " cannot feed");
      const std::string name = "rank" + std::to_string(r);
      PARITY_RETURN_IF_ERROR(writers_[r].Write(g, dir / name, nullptr));
      top["ranks"].push_back(name);
    }
    std::ofstream(dir / "manifest.json") << top.dump(1) << "\n";
    return Status::Ok();
  }

  // How `g`, on every rank, fails the world's real run.
  WorldFailure Judge(const ir::Graph& g) {
    const fs::path dir = scratch_ / ("c" + std::to_string(serial_++));
    WorldFailure f;
    if (Write(g, dir).ok()) {
      auto world = distributed::World::Load(dir);
      if (world.ok()) {
        ++runs_;
        f = FailureOf(run_(*world));
      }
    }
    RemoveAll(dir);
    return f;
  }

  std::vector<bool> Test(const std::vector<const ir::Graph*>& candidates) override {
    std::vector<bool> out;
    for (const ir::Graph* g : candidates) {
      const std::string text = ir::GraphToText(*g);
      auto hit = cache_.find(text);
      if (hit != cache_.end()) {
        ++cache_hits_;
        out.push_back(hit->second);
        continue;
      }
      out.push_back(cache_[text] = Judge(*g).Matches(original_));
    }
    return out;
  }
  int runs() const override { return runs_; }
  int cache_hits() const override { return cache_hits_; }

 private:
  const distributed::World& world_;
  Run run_;
  fs::path scratch_;
  std::vector<std::map<std::string, at::Tensor>> pools_;  // sized once: the writers hold references
  std::vector<CandidateWriter> writers_;
  WorldFailure original_;
  std::map<std::string, bool> cache_;
  int runs_ = 0, cache_hits_ = 0, serial_ = 0;
};

// Minify's node bisection over the world, one candidate at a time: the shortest prefix of `g`
// whose live values (steps.h SinksPrefix) still fail, and its last node, the first failing one
// (nullptr, and `g` as it is, where even the whole graph's live values do not fail).
std::pair<ir::Graph, const ir::Node*> ShortestFailingPrefix(const ir::Graph& g, Interestingness& test) {
  const auto ops = g.ops();
  auto prefix = [&](size_t i) { return SinksPrefix(g, ops[i]->index(), /*train=*/false); };
  auto fails = [&](size_t i) {
    auto c = prefix(i);
    return c && test.Test({&*c})[0];
  };
  if (ops.empty() || !fails(ops.size() - 1)) return {g.Clone(), nullptr};
  size_t lo = 0, hi = ops.size() - 1;  // invariant: prefix(hi) fails
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (fails(mid))
      hi = mid;
    else
      lo = mid + 1;
  }
  return {std::move(*prefix(hi)), ops[hi]};
}

// repro.py beside the minimum: this rank of OUT/world under torchrun, its graph compiled by the
// backend (the --import modules imported first), each output judged against the stored one.
void WriteReproScript(const fs::path& out, const distributed::RealRun& real, double tol, int world_size,
                      const WorldFailure& failure, const fs::path& source) {
  std::string imports;
  for (const auto& m : runtime::ImportModules()) imports += (imports.empty() ? "" : ",") + m;
  std::ofstream f(out / "repro.py");
  f << "#!/usr/bin/env python3\n"
    << "\"\"\"parity minify's minimum of " << source.string() << " across its " << world_size
    << " ranks, the collectives kept (" << failure.Describe() << ").\n\n"
    << "Every rank for real, " << real.backend << " compiling each rank's graph:\n"
    << "    torchrun --standalone --nproc-per-node " << world_size << " repro.py\n"
    << "Every rank simulated in one process (parity's replay):\n"
    << "    parity repro run " << (out / "world").string() << "\n\"\"\"\n"
    << "import json\nimport os\nimport sys\n\n";
  if (!imports.empty())  // what the backend's plugins register, in every rank before it compiles
    f << "os.environ.setdefault(\"" << runtime::kImportEnv << "\", " << json(imports).dump() << ")\n";
  f << "from parity_capture.rank_replay import torchrun_main  # noqa: E402\n\n"
    << "WORLD = os.path.join(os.path.dirname(os.path.abspath(__file__)), \"world\")\n"
    << "OPTIONS = json.loads(" << json(real.options.dump()).dump() << ")\n"
    << "sys.exit(torchrun_main(WORLD, " << json(real.backend).dump() << ", OPTIONS, " << tol << "))\n";
}

}  // namespace

WorldFailure FailureOf(const Report& report) {
  WorldFailure f;
  if (!report.ok() || report->pass) return f;
  if (!report->error.empty()) {
    f.kind = "crash";
    return f;
  }
  for (const auto& rr : report->ranks) {
    if (rr.report.pass) continue;
    f.rank = rr.rank;
    f.kind = "accuracy";
    for (size_t gi = 0; gi < rr.report.graphs.size(); ++gi) {
      const verify::GraphRunReport& g = rr.report.graphs[gi];
      if (g.pass) continue;
      f.graph = gi;
      if (!g.error.empty()) f.kind = "exception: " + NormalizeMessage(g.error);
      break;
    }
    return f;
  }
  return f;
}

Expected<MinifyResult> MinifyAcrossRanks(const MinifyOptions& opts, const distributed::World& world, const fs::path& out,
                                         std::ostream& log) {
  const auto started = std::chrono::steady_clock::now();
  PARITY_ASSIGN_OR_RETURN(experiment::ExperimentSpec spec, experiment::Case::FromRepro(world.rank(0), opts.backend, opts.experiment));
  PARITY_ASSIGN_OR_RETURN(verify::RunReproOptions judge, distributed::JudgeOptions(world, opts.experiment));
  const std::chrono::milliseconds wait{static_cast<int64_t>(opts.experiment.timeout_s) * 500};
  PARITY_ASSIGN_OR_RETURN(distributed::RealRun real, distributed::RealRunOf(spec.backend, spec.backend_options, judge.device.str(), wait));
  if (Status same = SameGraphs(world); !same.ok()) {
    Error e = Error::Runtime("no rank fails isolated, and minify reduces across ranks only ranks that run the same graphs: " +
                             same.error().message);
    e.exception_type = kDoesNotFail;
    return e;
  }
  real.scratch = out / "work" / "real";
  auto run = [&](const distributed::World& w) { return distributed::RunWithBackend(w, judge, real); };
  log << "minify: reducing across the " << world.world_size() << " ranks, the collectives kept (every candidate runs every rank "
      << "for real with " << real.backend << ")\n";
  const WorldFailure original = FailureOf(run(world));
  if (original.kind.empty()) {
    Error e = Error::Runtime(opts.repro_dir.string() + " does not fail with " + spec.backend + " on its ranks together either");
    e.exception_type = kDoesNotFail;
    return e;
  }
  log << "minify: the world fails: " << original.Describe() << "\n";
  PARITY_ASSIGN_OR_RETURN(distributed::ReplayValues values, distributed::SimulatedValues(world, judge.device.str(), wait, true));

  // The graph reduced: the first, the failing rank's failing graph tried first, whose world of it
  // alone fails the same way. A world of one graph is that graph: node bisection's first run (the
  // graph returning all its live values) tests it, and only where that does not fail is the graph
  // run as it is.
  const bool one_graph = world.rank(0).graphs().size() == 1;
  std::vector<size_t> order = {original.graph};
  for (size_t gi = 0; gi < world.rank(0).graphs().size(); ++gi)
    if (gi != original.graph) order.push_back(gi);
  std::unique_ptr<WorldTest> test;
  size_t chosen = 0;
  int runs = 1;
  for (size_t gi : order) {
    auto t = std::make_unique<WorldTest>(world, values, gi, spec.backend, spec.backend_options, run, out / "work" / "candidates");
    t->Expect(original);
    const bool fails = one_graph || t->Judge(world.rank(0).graphs()[gi].graph).Matches(original);
    runs += t->runs();
    if (fails) {
      test = std::move(t);
      chosen = gi;
      break;
    }
  }
  auto none_fails = [&] {
    Error e = Error::Runtime(opts.repro_dir.string() + ": no graph alone on every rank fails as the world does (" +
                             original.Describe() + ")");
    e.exception_type = kDoesNotFail;
    return e;
  };
  if (!test) return none_fails();
  const GraphEntry& entry = world.rank(0).graphs()[chosen];
  auto [prefix, first_failing] = ShortestFailingPrefix(entry.graph, *test);
  if (!first_failing && one_graph && !test->Judge(entry.graph).Matches(original)) return none_fails();
  log << "minify: graph " << entry.name << " (" << entry.graph.ops().size() << " ops) fails alone on every rank\n";
  const json culprit = first_failing ? NodeInfo(first_failing) : json(nullptr);
  if (first_failing)
    log << "node bisection: first failing node %" << first_failing->name() << " (" << first_failing->target() << ") after "
        << test->runs() << " runs of every rank\n";
  json passes = json::array();
  ir::Graph g = RunPassesToFixedPoint(Cleaned(std::move(prefix)), *test, 1, [](const ir::Graph&) {}, passes, log);

  PARITY_RETURN_IF_ERROR(test->Write(g, out / "world"));
  WriteReproScript(out, real, judge.same.tol, world.world_size(), original, fs::absolute(opts.repro_dir));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  json summary = {{"source", fs::absolute(opts.repro_dir).string()},
                  {"backend", spec.backend},
                  {"graph", entry.name},
                  {"signature", original.Describe()},
                  {"ops_before", entry.graph.ops().size()},
                  {"ops_after", g.ops().size()},
                  {"backend_runs", runs + test->runs()},
                  {"cache_hits", test->cache_hits()},
                  {"culprit", culprit},
                  {"passes", passes},
                  {"seconds", seconds},
                  {"minified", fs::absolute(out / "world").string()},
                  {"repro_script", fs::absolute(out / "repro.py").string()},
                  {"graph_text", ir::GraphToText(g)},
                  {"world",
                   {{"dir", fs::absolute(opts.repro_dir).string()},
                    {"world_size", world.world_size()},
                    {"rank", original.rank},
                    {"reduced_across_ranks", true},
                    {"collectives_kept", CollectivesIn(g)}}}};
  std::ofstream(out / "summary.json") << summary.dump(1) << "\n";
  RemoveAll(out / "work");
  log << "\nminified " << entry.name << " on every rank: " << entry.graph.ops().size() << " ops -> " << g.ops().size() << " ops ("
      << CollectivesIn(g).size() << " collectives kept), " << runs + test->runs() << " backend runs of every rank\n"
      << "multi-rank dir: " << (out / "world").string() << "\nunder torchrun: torchrun --standalone --nproc-per-node " << world.world_size() << " "
      << (out / "repro.py").string() << "\n"
      << ir::GraphToText(g);
  return MinifyResult{summary};
}

}  // namespace parity::minifier
