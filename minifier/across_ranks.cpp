#include "minifier/across_ranks.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <functional>
#include <map>
#include <ostream>
#include <set>

#include "distributed/groups.h"
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
#include "runtime/tool_script.h"
#include "runtime/worker.h"
#include "util/files.h"

namespace parity::minifier {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using WorldReportOr = Expected<distributed::WorldReport>;

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
  using Run = std::function<WorldReportOr(const distributed::World&)>;
  // `renamings`: per rank, rank 0's groups as that rank names them (distributed/groups.h): a
  // candidate is rank 0's graph, each rank's copy calling its own groups.
  WorldTest(const distributed::World& world, const distributed::ReplayValues& values, size_t gi, const std::string& backend,
            const json& backend_options, std::vector<distributed::GroupRenaming> renamings, Run run, fs::path scratch)
      : world_(world), renamings_(std::move(renamings)), run_(std::move(run)), scratch_(std::move(scratch)) {
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

  // `g` (rank 0's form) on every rank, each calling its own groups, as a multi-rank dir at `dir` (replaced).
  Status Write(const ir::Graph& g, const fs::path& dir) const {
    RemoveAll(dir);
    json top = {{"format", distributed::kWorldFormat}, {"version", distributed::kWorldFormatVersion},
                {"world_size", world_.world_size()}, {"ranks", json::array()}};
    for (size_t r = 0; r < writers_.size(); ++r) {
      if (!writers_[r].Writable(g)) return Error::Internal("minify: a candidate rank " + std::to_string(r) + " cannot feed");
      const std::string name = "rank" + std::to_string(r);
      if (distributed::IsIdentity(renamings_[r])) {
        PARITY_RETURN_IF_ERROR(writers_[r].Write(g, dir / name, nullptr));
      } else {
        ir::Graph mine = g.Clone();
        PARITY_RETURN_IF_ERROR(distributed::RenameGroups(mine, renamings_[r]));
        PARITY_RETURN_IF_ERROR(writers_[r].Write(mine, dir / name, nullptr));
      }
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
      out.push_back(cache_[text] = CollectivesWaited(*g) && Judge(*g).Matches(original_));
    }
    return out;
  }
  int runs() const override { return runs_; }
  int cache_hits() const override { return cache_hits_; }

 private:
  const distributed::World& world_;
  std::vector<distributed::GroupRenaming> renamings_;
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
  auto prefix = [&](size_t i) { return SinksPrefix(g, ops[i]->index()); };
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
  // A wait's failure is its collective's: the prefix ending at the collective reads it unwaited.
  const ir::Node* first = ops[hi];
  if (first->OperatorName().first == "_c10d_functional::wait_tensor" && first->args[0].node) first = first->args[0].node;
  return {std::move(*prefix(hi)), first};
}

// repro.py beside the minimum (OUT/world): standalone, written by the package's torch-free script
// (repro_script.write_world_script: the comparison rules, the graph reader and standalone_ranks
// inlined); under torchrun each rank's graph compiled by the backend (the --import modules imported
// first), each output judged against the stored one.
Status WriteReproScript(const fs::path& out, const distributed::RealRun& real, double tol, int world_size,
                        const WorldFailure& failure, const fs::path& source, const json& compiler_culprit) {
  json req = {{"out", fs::absolute(out / "repro.py").string()},
              {"dynamo_backend", real.backend},
              {"imports", runtime::ImportModules()},
              {"world",
               {{"options", real.options},
                {"tol", tol},
                {"world_size", world_size},
                {"title", "parity minify's minimum of " + source.string() + " across its " + std::to_string(world_size) +
                              " ranks, the collectives kept (" + failure.Describe() + ")."}}}};
  if (!compiler_culprit.is_null()) req["compiler_culprit"] = compiler_culprit;
  return runtime::RunToolScript("repro_script", {req.dump()}, out / "repro_script.log");
}

}  // namespace

bool CollectivesWaited(const ir::Graph& g) {
  auto async = [](const ir::Node* n) {
    if (n->kind() != ir::NodeKind::kCallFunction) return false;
    const std::string op = n->OperatorName().first;
    return op.rfind("_c10d_functional::", 0) == 0 && op != "_c10d_functional::wait_tensor";
  };
  auto waits = [](const ir::Node* n) {
    return n->kind() == ir::NodeKind::kCallFunction && n->OperatorName().first == "_c10d_functional::wait_tensor";
  };
  std::set<const ir::Node*> unwaited;  // async results and their getitems
  for (const ir::Node* n : g.nodes()) {
    if (async(n)) unwaited.insert(n);
    if (n->kind() == ir::NodeKind::kCallFunction && n->target() == ir::kGetItem && n->args[0].node && async(n->args[0].node))
      unwaited.insert(n);
  }
  for (const ir::Node* n : g.nodes()) {
    if (waits(n) || (n->kind() == ir::NodeKind::kCallFunction && n->target() == ir::kGetItem)) continue;
    for (const ir::Node* in : n->Inputs())
      if (unwaited.count(in)) return false;  // an op, or the output, reads one unwaited
  }
  return true;
}

WorldFailure FailureOf(const WorldReportOr& report) {
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

namespace {

Error DoesNotFail(const std::string& why) {
  Error e = Error::Runtime(why);
  e.exception_type = kDoesNotFail;
  return e;
}

// What every step of a reduction across ranks shares.
struct AcrossRanks {
  const MinifyOptions& opts;
  const distributed::World& world;
  fs::path out;
  std::ostream& log;
  experiment::ExperimentSpec spec;
  verify::RunReproOptions judge;
  distributed::RealRun real;
  std::chrono::milliseconds wait;
  std::vector<distributed::GroupRenaming> renamings;  // rank 0's groups as each rank names them
  WorldFailure original;
  int runs = 0;  // real runs of every rank outside the test's

  WorldReportOr Run(const distributed::World& w) { return distributed::RunWithBackend(w, judge, real); }
};

// The backend's real run and the ranks' judge; the graphs checked alike on every rank.
Expected<AcrossRanks> Prepare(const MinifyOptions& opts, const distributed::World& world, const fs::path& out, std::ostream& log) {
  PARITY_ASSIGN_OR_RETURN(experiment::ExperimentSpec spec, experiment::Case::FromRepro(world.rank(0), opts.backend, opts.experiment));
  PARITY_ASSIGN_OR_RETURN(verify::RunReproOptions judge, distributed::JudgeOptions(world, opts.experiment));
  const std::chrono::milliseconds wait{static_cast<int64_t>(opts.experiment.timeout_s) * 500};
  PARITY_ASSIGN_OR_RETURN(distributed::RealRun real, distributed::RealRunOf(spec.backend, spec.backend_options, judge.device.str(), wait));
  auto renamings = distributed::AlikeUpToGroups(world);
  if (!renamings.ok())
    return DoesNotFail("no rank fails isolated, and minify reduces across ranks only ranks that run the same graphs (up to the "
                       "process groups they call): " + renamings.error().message);
  if (std::any_of(renamings->begin(), renamings->end(), [](const auto& m) { return !distributed::IsIdentity(m); }))
    log << "minify: the ranks run the same graphs, each calling its own process groups (rank 0's renamed on the others)\n";
  real.scratch = out / "work" / "real";
  return AcrossRanks{opts, world, out, log, std::move(spec), std::move(judge), std::move(real), wait, std::move(*renamings), {}, 0};
}

// The world's failure with the backend, every rank run for real.
Status Confirm(AcrossRanks& a) {
  a.log << "minify: reducing across the " << a.world.world_size() << " ranks, the collectives kept (every candidate runs every "
        << "rank for real with " << a.real.backend << ")\n";
  a.original = FailureOf(a.Run(a.world));
  ++a.runs;
  if (a.original.kind.empty())
    return DoesNotFail(a.opts.repro_dir.string() + " does not fail with " + a.spec.backend + " on its ranks together either");
  a.log << "minify: the world fails: " << a.original.Describe() << "\n";
  return Status::Ok();
}

// The graph reduced and its test: the first, the failing rank's failing graph tried first, whose
// world of it alone fails the same way. A world of one graph is that graph: node bisection's first
// run (the graph returning all its live values) tests it.
Expected<std::pair<size_t, std::unique_ptr<WorldTest>>> ChooseGraph(AcrossRanks& a, const distributed::ReplayValues& values) {
  const size_t n = a.world.rank(0).graphs().size();
  std::vector<size_t> order = {a.original.graph};
  for (size_t gi = 0; gi < n; ++gi)
    if (gi != a.original.graph) order.push_back(gi);
  for (size_t gi : order) {
    auto t = std::make_unique<WorldTest>(a.world, values, gi, a.spec.backend, a.spec.backend_options, a.renamings,
                                         [&a](const distributed::World& w) { return a.Run(w); }, a.out / "work" / "candidates");
    t->Expect(a.original);
    const bool fails = n == 1 || t->Judge(a.world.rank(0).graphs()[gi].graph).Matches(a.original);
    a.runs += t->runs();
    if (fails) return std::make_pair(gi, std::move(t));
  }
  return DoesNotFail(a.opts.repro_dir.string() + ": no graph alone on every rank fails as the world does (" + a.original.Describe() + ")");
}

struct Reduced {
  ir::Graph graph;
  json culprit;  // the first failing node (node bisection), null where none was found
  json passes = json::array();
  json stages;   // StageBisect's answer
  json compiler_culprit;  // CompilerCulprit's
};

// Node bisection's shortest failing prefix, then the delta passes to a fixed point.
Expected<Reduced> Reduce(AcrossRanks& a, const GraphEntry& entry, WorldTest& test) {
  auto [prefix, first_failing] = ShortestFailingPrefix(entry.graph, test);
  if (!first_failing && a.world.rank(0).graphs().size() == 1 && !test.Judge(entry.graph).Matches(a.original))
    return DoesNotFail(a.opts.repro_dir.string() + ": its graph alone on every rank does not fail as the world does (" +
                       a.original.Describe() + ")");
  a.log << "minify: graph " << entry.name << " (" << entry.graph.ops().size() << " ops) fails alone on every rank\n";
  Reduced r;
  r.culprit = first_failing ? NodeInfo(first_failing) : json(nullptr);
  if (first_failing)
    a.log << "node bisection: first failing node %" << first_failing->name() << " (" << first_failing->target() << ") after "
          << test.runs() << " runs of every rank\n";
  r.graph = RunPassesToFixedPoint(Cleaned(std::move(prefix)), test, 1, [](const ir::Graph&) {}, r.passes, a.log);
  return r;
}

// Stage bisection across ranks: the minimum on every rank, for real, with the compile stages
// before the backend (dynamo alone, then AOTAutograd, and for Inductor AOTAutograd with its
// decompositions and partitioner: PyTorch's compiler bisector's stages); the first that fails the
// same way names where the failure enters, else the backend's own part does. Null when skipped.
// Where StageBisect writes the minimum as a multi-rank dir, which CompilerCulprit runs again.
fs::path MinimumDir(const AcrossRanks& a) { return a.out / "work" / "minimum"; }

json StageBisect(AcrossRanks& a, WorldTest& test, const ir::Graph& g) {
  if (!a.opts.stage_bisect) return nullptr;
  std::vector<std::string> stages = {"eager", "aot_eager"};
  if (a.real.backend == "inductor") stages.push_back("aot_eager_decomp_partition");
  const fs::path dir = MinimumDir(a);
  if (!test.Write(g, dir).ok()) return nullptr;
  auto world = distributed::World::Load(dir);
  if (!world.ok()) return nullptr;
  json passed = json::array();
  for (const std::string& stage : stages) {
    distributed::RealRun run = a.real;
    run.backend = stage;
    run.options = json::object();  // the backend's options are its own (Inductor config keys)
    ++a.runs;
    if (FailureOf(distributed::RunWithBackend(*world, a.judge, run)).Matches(a.original)) {
      a.log << "stage bisection: the failure enters at " << stage << "\n";
      return {{"stage", stage}, {"passed", passed}};
    }
    passed.push_back(stage);
  }
  a.log << "stage bisection: " << passed.size() << " earlier stages pass; the failure is " << a.real.backend << "'s own\n";
  return {{"stage", a.real.backend}, {"passed", passed}};
}

// Inside the backend, when the stages before it pass on an accuracy failure: PyTorch's compiler
// bisector run by every rank in step on the minimum (the dir StageBisect wrote), for real (rank_replay's compiler_bisect: a
// try passes where every rank's outputs pass), naming the pass, lowering or config toggle whose
// removal removes the failure; its answer as the single-process minify's (steps.h
// CompilerCulpritSentence). Null when not asked or not the backend's own.
json CompilerCulprit(AcrossRanks& a, const json& stages) {
  if (!a.opts.compiler_bisect || stages.is_null() || stages.value("stage", "") != a.real.backend ||
      a.original.kind != "accuracy")
    return nullptr;
  json culprit;
  if (a.real.backend != "inductor") {  // the bisector's subsystems are Inductor's
    culprit = {{"none", a.real.backend + " is not Inductor: it has no compiler subsystems PyTorch's bisector knows"}};
    culprit["sentence"] = CompilerCulpritSentence(culprit);
    return culprit;
  }
  auto world = distributed::World::Load(MinimumDir(a));  // StageBisect's, which ran: stages is set
  if (!world.ok()) return {{"error", world.error().message}, {"sentence", "the compiler bisection did not run"}};
  distributed::RealRun run = a.real;
  run.scratch = a.out / "work" / "bisect";
  run.compiler_bisect = {{"tol", a.judge.same.tol}};
  auto ran = distributed::RunReal(*world, run);
  auto answer = ran.ok() ? ReadFile(run.scratch / "bisect.json") : Expected<std::string>(ran.error());
  const json bisected = answer.ok() ? json::parse(*answer, nullptr, false) : json();
  if (!bisected.is_object())
    culprit = {{"error", answer.ok() ? "rank 0 answered no bisection" : answer.error().message}};
  else
    culprit = bisected.value("result", json()).is_null() ? json::object() : bisected["result"];
  if (bisected.is_object()) a.runs += bisected.value("runs", 0);
  culprit["sentence"] = CompilerCulpritSentence(culprit);
  a.log << "compiler culprit (every rank in step): " << culprit["sentence"].get<std::string>() << "\n";
  return culprit;
}

// OUT/world, OUT/repro.py and OUT/summary.json; the summary, also said in the log.
Expected<json> WriteMinimum(AcrossRanks& a, const GraphEntry& entry, WorldTest& test, const Reduced& r, const json& ranks_tried,
                            double seconds) {
  const ir::Graph& g = r.graph;
  PARITY_RETURN_IF_ERROR(test.Write(g, a.out / "world"));
  PARITY_RETURN_IF_ERROR(WriteReproScript(a.out, a.real, a.judge.same.tol, a.world.world_size(), a.original,
                                         fs::absolute(a.opts.repro_dir), r.compiler_culprit));
  const int runs = a.runs + test.runs();
  json summary = {{"source", fs::absolute(a.opts.repro_dir).string()},
                  {"backend", a.spec.backend},
                  {"graph", entry.name},
                  {"signature", a.original.Describe()},
                  {"ops_before", entry.graph.ops().size()},
                  {"ops_after", g.ops().size()},
                  {"backend_runs", runs},
                  {"cache_hits", test.cache_hits()},
                  {"culprit", r.culprit},
                  {"stages", r.stages},
                  {"compiler_culprit", r.compiler_culprit},
                  {"passes", r.passes},
                  {"seconds", seconds},
                  {"minified", fs::absolute(a.out / "world").string()},
                  {"repro_script", fs::absolute(a.out / "repro.py").string()},
                  {"graph_text", ir::GraphToText(g)},
                  {"world",
                   {{"dir", fs::absolute(a.opts.repro_dir).string()},
                    {"world_size", a.world.world_size()},
                    {"rank", a.original.rank},
                    {"reduced_across_ranks", true},
                    {"collectives_kept", CollectivesIn(g)},
                    {"ranks_tried", ranks_tried}}}};
  std::ofstream(a.out / "summary.json") << summary.dump(1) << "\n";
  a.log << "\nminified " << entry.name << " on every rank: " << entry.graph.ops().size() << " ops -> " << g.ops().size() << " ops ("
        << CollectivesIn(g).size() << " collectives kept), " << runs << " backend runs of every rank\n"
        << "multi-rank dir: " << (a.out / "world").string() << "\nunder torchrun: torchrun --standalone --nproc-per-node "
        << a.world.world_size() << " " << (a.out / "repro.py").string() << "\n"
        << ir::GraphToText(g);
  return summary;
}

}  // namespace

Expected<MinifyResult> MinifyAcrossRanks(const MinifyOptions& opts, const distributed::World& world, const fs::path& out,
                                         const json& ranks_tried, std::ostream& log) {
  const auto started = std::chrono::steady_clock::now();
  PARITY_ASSIGN_OR_RETURN(AcrossRanks a, Prepare(opts, world, out, log));
  PARITY_RETURN_IF_ERROR(Confirm(a));
  PARITY_ASSIGN_OR_RETURN(distributed::ReplayValues values, distributed::SimulatedValues(world, a.judge.device.str(), a.wait, true));
  PARITY_ASSIGN_OR_RETURN(auto chosen, ChooseGraph(a, values));
  const GraphEntry& entry = world.rank(0).graphs()[chosen.first];
  PARITY_ASSIGN_OR_RETURN(Reduced reduced, Reduce(a, entry, *chosen.second));
  reduced.stages = StageBisect(a, *chosen.second, reduced.graph);
  reduced.compiler_culprit = CompilerCulprit(a, reduced.stages);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  PARITY_ASSIGN_OR_RETURN(json summary, WriteMinimum(a, entry, *chosen.second, reduced, ranks_tried, seconds));
  RemoveAll(out / "work");
  return MinifyResult{summary};
}

}  // namespace parity::minifier
