#include "minifier/minify.h"

#include <chrono>
#include <fstream>
#include <iostream>
#include <map>

#include "interpreter/interpreter.h"
#include "minifier/delta.h"
#include "minifier/oracle.h"
#include "repro/graph_json.h"
#include "util/files.h"
#include "util/subprocess.h"
#include "verifier/backend.h"
#include "verifier/isolation.h"
#include "verifier/verify.h"

namespace parity::minifier {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The prefix of `g` up to op `op_index`, returning every tensor value nothing inside the
// prefix reads (so no node of the prefix is dead).
std::optional<ir::Graph> SinksPrefix(const ir::Graph& g, size_t node_index) {
  std::set<const ir::Node*> read;
  for (const ir::Node* n : g.nodes())
    if (n->index() <= node_index)
      for (const ir::Node* in : n->Inputs()) read.insert(in);
  std::vector<std::string> outs;
  for (const ir::Node* n : g.nodes()) {
    if (n->index() > node_index || n->kind() != ir::NodeKind::kCallFunction || read.count(n)) continue;
    // Only single tensor values: a tuple's getitem nodes come later; an effect-only op has none.
    if (n->meta.size() != 1 || !n->meta[0] || n->HasSideEffects()) continue;
    outs.push_back(n->name());
  }
  if (outs.empty()) return std::nullopt;
  auto p = g.Prefix(node_index, outs);
  if (!p.ok()) return std::nullopt;
  return std::move(*p);
}

json NodeInfo(const ir::Node* n) {
  return {{"node", n->name()}, {"target", n->target()}, {"module_path", n->module_path}, {"stack_trace", n->stack_trace}};
}

}  // namespace

Expected<MinifyResult> Minify(const MinifyOptions& opts, std::ostream& log) {
  const auto t0 = std::chrono::steady_clock::now();
  PARITY_ASSIGN_OR_RETURN(ReproDir repro, ReproDir::Load(opts.repro_dir));
  const Manifest& m = repro.manifest();
  const std::string backend = opts.backend.value_or(m.backend.value_or(""));
  if (backend.empty())
    return Error::BadInput((opts.repro_dir / "manifest.json").string() + ": names no backend; pass --backend");
  PARITY_ASSIGN_OR_RETURN(auto made, verifier::MakeBackend(backend));
  (void)made;
  const json options = opts.backend_options.value_or(m.backend_options);
  const fs::path out = opts.out_dir.empty() ? fs::path(opts.repro_dir.string() + "-minify") : opts.out_dir;
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) return Error::BadInput("--out " + out.string() + ": " + ec.message());
  const std::string suite = m.extra.value("suite", std::string("repro"));
  double tol = verifier::DefaultTolerance(suite, m.mode, m.dtype);
  if (m.failure.is_object() && m.failure.contains("tol") && m.failure["tol"].is_number()) tol = m.failure["tol"];
  if (opts.tol) tol = *opts.tol;

  verifier::ExperimentSpec base;
  base.model = m.model;
  base.suite = suite;
  base.backend = backend;
  base.backend_options = options;
  base.test = m.mode;
  base.dtype = m.dtype;
  base.device = opts.device.empty() ? m.device : opts.device;
  base.tol = tol;
  base.ignore_non_fp = !opts.strict;
  base.cache_dir = (opts.cache_dir.empty() ? verifier::DefaultCacheDir() : opts.cache_dir).string();
  verifier::IsolatedRunner runner(out / "work", opts.timeout_s, opts.jobs);
  json summary = {{"source", fs::absolute(opts.repro_dir).string()}, {"backend", backend}, {"backend_options", options},
                  {"tol", tol}, {"strict", opts.strict}};

  // 1. The original must fail, the same way, reliably.
  const fs::path state_file = out / "state.json";
  json state = json::object();
  if (auto st = ReadFile(state_file); st.ok()) state = json::parse(*st, nullptr, false);
  const bool resuming = state.is_object() && state.value("source", std::string()) == summary["source"].get<std::string>() &&
                        state.value("backend", std::string()) == backend && state.contains("signature") &&
                        fs::exists(out / "checkpoint" / "manifest.json");
  Signature original;
  int backend_runs = 0;
  if (!resuming && !opts.check_command.empty()) {
    // --check decides what is interesting, the original included.
    SpawnOptions so;
    so.env.push_back("PARITY_CANDIDATE=" + fs::absolute(opts.repro_dir).string());
    PARITY_ASSIGN_OR_RETURN(auto child, Child::Spawn({"/bin/sh", "-c", opts.check_command + " \"$PARITY_CANDIDATE\""}, so));
    ExitInfo e = child.Wait(std::chrono::seconds(opts.timeout_s));
    ++backend_runs;
    if (!(e.exited && e.code == 0))
      return Error::Runtime("the --check command does not find the original interesting (" + e.Describe() + "); nothing to minify");
    original.kind = FailureKind::kAccuracy;  // placeholder: the check command is the oracle
    original.message = "--check " + opts.check_command;
    summary["confirm"] = {{"runs", 1}, {"failing", 1}};
    log << "original is interesting to --check\n";
  } else if (resuming) {
    PARITY_ASSIGN_OR_RETURN(original, Signature::FromJson(state["signature"]));
    summary["confirm"] = state["confirm"];
    log << "resuming from " << (out / "checkpoint").string() << " (signature: " << original.Describe() << ")\n";
  } else {
    std::vector<std::pair<verifier::ExperimentSpec, fs::path>> batch;
    for (int i = 0; i < std::max(1, opts.confirm_runs); ++i) {
      auto s = base;
      s.repro = fs::absolute(opts.repro_dir).string();
      batch.emplace_back(s, out / "work" / ("confirm" + std::to_string(i)));
    }
    auto results = runner.RunMany(batch);
    backend_runs += static_cast<int>(results.size());
    std::map<std::string, std::pair<int, Signature>> seen;
    int failing = 0;
    for (const auto& r : results) {
      Signature s = Signature::FromResult(r);
      if (s.kind == FailureKind::kNone) continue;
      ++failing;
      auto& slot = seen[s.ToJson().dump()];
      slot.first++;
      slot.second = s;
    }
    const int runs = static_cast<int>(results.size());
    summary["confirm"] = {{"runs", runs}, {"failing", failing}};
    if (failing == 0) {
      std::string why = results.empty() ? "" : std::string(verifier::ToString(results[0].code)) + " " + results[0].error;
      return Error::Runtime("the original does not fail with backend " + backend + " (" + std::to_string(runs) +
                            " runs; first: " + why + "); nothing to minify");
    }
    int best = 0;
    for (auto& [k, v] : seen)
      if (v.first > best) {
        best = v.first;
        original = v.second;
      }
    if (best < runs) {
      const std::string rate = std::to_string(best) + "/" + std::to_string(runs);
      if (!opts.majority || best * 2 <= runs)
        return Error::Runtime("the original fails only sometimes (" + rate + " runs show " + original.Describe() +
                              "); rerun with --majority to reduce by majority vote, or fix the nondeterminism");
      log << "flaky original: " << rate << " runs fail; reducing by majority vote\n";
    }
    log << "original fails: " << original.Describe() << " (" << best << "/" << runs << " runs)\n";
  }
  summary["signature"] = original.ToJson();

  // 2. Stage bisection: eager -> aot_eager -> aot_eager_decomp_partition -> the backend.
  if (!resuming && opts.stage_bisect && opts.check_command.empty()) {
    std::vector<std::string> stages = {"aot_eager", "aot_eager_decomp_partition"};
    json stage_results = json::array();
    std::string first = backend;
    std::vector<std::pair<verifier::ExperimentSpec, fs::path>> batch;
    for (const auto& st : stages) {
      if (st == backend) break;
      auto s = base;
      s.backend = st;
      s.backend_options = json::object();
      s.repro = fs::absolute(opts.repro_dir).string();
      batch.emplace_back(s, out / "work" / ("stage-" + st));
    }
    auto results = runner.RunMany(batch);
    backend_runs += static_cast<int>(results.size());
    for (size_t i = 0; i < results.size(); ++i) {
      Signature s = Signature::FromResult(results[i]);
      stage_results.push_back({{"stage", batch[i].first.backend}, {"code", verifier::ToString(results[i].code)},
                               {"matches", s.Matches(original)}});
      if (s.Matches(original) && first == backend) first = batch[i].first.backend;
    }
    stage_results.push_back({{"stage", backend}, {"code", "FAIL/original"}, {"matches", true}});
    summary["stages"] = stage_results;
    summary["first_failing_stage"] = first;
    const std::string who = first == "aot_eager"                    ? "AOTAutograd (functionalization/tracing)"
                            : first == "aot_eager_decomp_partition" ? "decompositions or the partitioner"
                                                                    : "the backend's compiler/runtime (" + backend + ")";
    log << "first failing stage: " << first << " -> " << who << "\n";
  }

  // 3. Graph bisection: the first graph that fails alone, on its real inputs.
  size_t gi = 0;
  auto all_tensors = [&]() {
    std::map<std::string, at::Tensor> t;
    for (const auto& info : repro.tensors().tensors()) t[info.name] = *repro.tensors().Get(info.name);
    return t;
  }();
  if (repro.graphs().size() > 1 && !resuming) {
    for (; gi < repro.graphs().size(); ++gi) {
      const GraphEntry& g = repro.graphs()[gi];
      Oracle::Config c{base, original, m, g.name, g.inputs, out / "work" / ("graph-" + g.name), opts.check_command, opts.timeout_s};
      Oracle probe(runner, c, all_tensors);
      if (probe.Test({&g.graph})[0]) break;
      backend_runs += probe.backend_runs();
    }
    if (gi == repro.graphs().size())
      return Error::Runtime("no single graph fails alone with " + original.Describe() + " (the failure needs several graphs)");
    log << "first failing graph: " << repro.graphs()[gi].name << " of " << repro.graphs().size() << "\n";
  } else if (resuming) {
    gi = state.value("graph_index", 0);
  }
  const GraphEntry& entry = repro.graphs()[gi];
  summary["graph"] = entry.name;
  summary["nodes_before"] = entry.graph.size();
  summary["ops_before"] = entry.graph.ops().size();

  // The reference's concrete value of every tensor node feeds cut edges.
  {
    PARITY_ASSIGN_OR_RETURN(auto program, interp::Program::Compile(entry.graph, (repro.root() / entry.file).string()));
    interp::RunOptions ro;
    ro.record_all = true;
    ro.device = c10::Device(base.device);
    PARITY_ASSIGN_OR_RETURN(auto inputs, repro.Inputs(entry));
    PARITY_ASSIGN_OR_RETURN(auto attrs, repro.Attrs(entry));
    PARITY_ASSIGN_OR_RETURN(auto ref, program.Run(inputs, attrs, ro));
    for (auto& [name, v] : ref.values)
      if (v.isTensor()) all_tensors["ref/" + name] = v.toTensor().detach().to(at::kCPU);
  }
  Oracle::Config cfg{base, original, m, entry.name, entry.inputs, out / "work" / "candidates", opts.check_command, opts.timeout_s};
  Oracle oracle(runner, cfg, all_tensors);
  auto checkpoint = [&](const ir::Graph& g, const json& extra) {
    (void)oracle.Write(g, out / "checkpoint", original.ToJson());
    json s = {{"source", summary["source"]}, {"backend", backend}, {"signature", original.ToJson()},
              {"confirm", summary["confirm"]}, {"graph_index", gi}};
    for (auto it = extra.begin(); it != extra.end(); ++it) s[it.key()] = it.value();
    (void)WriteFileAtomic(state_file, s.dump(2));
  };

  ir::Graph current = entry.graph.Clone();
  if (resuming) {
    PARITY_ASSIGN_OR_RETURN(ReproDir cp, ReproDir::Load(out / "checkpoint"));
    current = cp.graphs()[0].graph.Clone();
    if (state.contains("culprit")) summary["culprit"] = state["culprit"];
  } else {
    // 4. Node bisection: the shortest failing prefix (k-ary search, `jobs` probes at a time).
    auto ops = current.ops();
    size_t lo = 0, hi = ops.size() - 1;  // invariant: prefix(hi) reproduces, or hi is the last op
    auto full = SinksPrefix(current, ops.back()->index());
    bool full_ok = full && oracle.Test({&*full})[0];
    if (full_ok) {
      while (lo < hi) {
        const size_t k = std::min<size_t>(opts.jobs, hi - lo);
        std::vector<size_t> probes;
        for (size_t i = 1; i <= k; ++i) probes.push_back(lo + (hi - lo) * i / (k + 1));
        probes.erase(std::unique(probes.begin(), probes.end()), probes.end());
        std::vector<std::optional<ir::Graph>> cands;
        std::vector<const ir::Graph*> ptrs;
        std::vector<size_t> where;
        for (size_t p : probes) {
          cands.push_back(SinksPrefix(current, ops[p]->index()));
        }
        for (size_t i = 0; i < cands.size(); ++i)
          if (cands[i]) {
            ptrs.push_back(&*cands[i]);
            where.push_back(probes[i]);
          }
        auto ok = oracle.Test(ptrs);
        size_t new_lo = lo, new_hi = hi;
        for (size_t i = 0; i < ok.size(); ++i) {
          if (ok[i]) {
            new_hi = std::min(new_hi, where[i]);
            break;
          }
          new_lo = std::max(new_lo, where[i] + 1);
        }
        if (new_lo == lo && new_hi == hi) new_lo = lo + 1;  // no probe decided: creep
        lo = std::min(new_lo, new_hi);
        hi = new_hi;
      }
      const ir::Node* culprit = ops[hi];
      summary["culprit"] = NodeInfo(culprit);
      log << "node bisection: first failing node %" << culprit->name() << " (" << culprit->target() << ")"
          << (culprit->module_path.empty() ? "" : " in " + culprit->module_path) << " after " << oracle.backend_runs()
          << " backend runs\n";
      if (!culprit->stack_trace.empty()) log << "  " << culprit->stack_trace.substr(0, culprit->stack_trace.find('\n')) << "\n";
      auto p = SinksPrefix(current, culprit->index());
      if (p) current = std::move(*p);
    } else {
      log << "node bisection skipped: the graph returning all its live values does not fail the same way\n";
    }
    checkpoint(current, {{"culprit", summary.value("culprit", json())}});
  }

  // 5. Delta passes to a fixed point.
  json pass_stats = json::array();
  for (bool changed = true; changed;) {
    changed = false;
    for (const auto& pass : DeltaPasses()) {
      PassStats st;
      current = RunDeltaPass(pass, std::move(current), oracle, opts.jobs,
                             [&](const ir::Graph& g) { checkpoint(g, {{"culprit", summary.value("culprit", json())}}); }, st);
      if (st.accepted) {
        changed = true;
        log << "  " << pass.name << ": " << st.accepted << " accepted of " << st.candidates << " candidates, now "
            << current.ops().size() << " ops\n";
      }
      pass_stats.push_back({{"pass", st.pass}, {"candidates", st.candidates}, {"invalid", st.invalid}, {"accepted", st.accepted}});
    }
  }

  // 6. Outputs: minified/ (data only), repro.py, summary.
  const fs::path minified = out / "minified";
  PARITY_RETURN_IF_ERROR(oracle.Write(current, minified, original.ToJson()));
  {
    auto mtext = ReadFile(minified / "manifest.json");
    auto gtext = ReadFile(minified / "graphs" / (entry.name + ".json"));
    if (mtext.ok() && gtext.ok()) {
      json mj = json::parse(*mtext);
      mj["failure"]["tol"] = tol;
      (void)WriteFileAtomic(minified / "manifest.json", mj.dump(2) + "\n");
      (void)WriteFileAtomic(minified / "repro.py", ReproScript("graphs/" + entry.name + ".json", mj, json::parse(*gtext)));
      fs::permissions(minified / "repro.py", fs::perms::owner_exec | fs::perms::group_exec | fs::perms::others_exec,
                      fs::perm_options::add, ec);
    }
  }
  json culprits = json::array();
  for (const ir::Node* n : current.ops()) culprits.push_back(NodeInfo(n));
  backend_runs += oracle.backend_runs();
  summary["nodes_after"] = current.size();
  summary["ops_after"] = current.ops().size();
  summary["culprit_ops"] = culprits;
  summary["backend_runs"] = backend_runs;
  summary["cache_hits"] = oracle.cache_hits();
  summary["passes"] = pass_stats;
  summary["wall_time_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  summary["minified_dir"] = fs::absolute(minified).string();
  summary["graph_text"] = ir::GraphToText(current);
  (void)WriteFileAtomic(out / "summary.json", summary.dump(2) + "\n");
  RemoveAll(out / "work");

  log << "\nminified " << summary["graph"].get<std::string>() << ": " << summary["ops_before"] << " ops -> " << summary["ops_after"]
      << " ops, " << backend_runs << " backend runs, " << static_cast<int>(summary["wall_time_s"].get<double>()) << " s\n"
      << ir::GraphToText(current);
  for (const ir::Node* n : current.ops())
    if (!n->stack_trace.empty()) log << "%" << n->name() << " comes from:\n" << n->stack_trace << "\n";
  log << "repro dir: " << minified.string() << "\nstandalone script: " << (minified / "repro.py").string() << "\n";
  MinifyResult result;
  result.reproduced = true;
  result.summary = summary;
  return result;
}

}  // namespace parity::minifier
