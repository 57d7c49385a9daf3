#include "minifier/interesting.h"

#include <ostream>
#include <set>

#include "experiment/reference.h"
#include "interpreter/interpreter.h"
#include "minifier/passes/passes.h"
#include "minifier/steps/loss.h"
#include "repro/graph_json.h"
#include "util/files.h"
#include "util/subprocess.h"

namespace parity::minifier {
namespace fs = std::filesystem;

CandidateWriter::CandidateWriter(Manifest manifest, const GraphEntry& original, const std::map<std::string, at::Tensor>& tensors)
    : manifest_(std::move(manifest)),
      graph_name_(original.name),
      inputs_(original.inputs),
      tangents_(original.tangents),
      requires_grad_(original.requires_grad),
      tensors_(tensors) {
  manifest_.producer = "parity minify";
  if (!original.mode.empty()) manifest_.mode = original.mode;
  if (!original.dtype.empty()) manifest_.dtype = original.dtype;
  if (!original.amp.empty())
    manifest_.extra["amp"] = original.amp;
  else
    manifest_.extra.erase("amp");
  for (const ir::Node* n : original.graph.OutputValues()) output_nodes_.push_back(n->name());
  if (requires_grad_) DifferentiatedValues(original.graph, *requires_grad_);
}

void DifferentiatedValues(const ir::Graph& g, std::set<std::string>& requires_grad) {
  std::set<const ir::Node*> carries;  // values autograd differentiates in `g`
  for (const ir::Node* n : g.nodes()) {
    switch (n->kind()) {
      case ir::NodeKind::kPlaceholder:
        if (requires_grad.count(n->name())) carries.insert(n);
        break;
      case ir::NodeKind::kGetAttr:
        if (requires_grad.count(n->target())) carries.insert(n);
        break;
      case ir::NodeKind::kCallFunction: {
        bool floating = false;
        for (const auto& m : n->meta) floating = floating || (m && c10::isFloatingType(m->dtype));
        bool reads = false;
        for (const ir::Node* in : n->Inputs()) reads = reads || carries.count(in) > 0;
        if (floating && reads && n->target() != "aten::detach") {
          carries.insert(n);
          requires_grad.insert(n->name());
        }
        break;
      }
      default:
        break;
    }
  }
}

std::string CandidateWriter::KeyFor(const std::string& placeholder) const {
  auto it = inputs_.find(placeholder);
  return it != inputs_.end() ? it->second : "ref/" + placeholder;
}

bool CandidateWriter::Writable(const ir::Graph& g) const {
  for (const ir::Node* p : g.placeholders())
    if (p->sym.empty() && !tensors_.count(KeyFor(p->name()))) return false;  // a size input is bound from the symbols
  return !g.OutputValues().empty();
}

namespace {

// The value a placeholder reads: `t`, or its leading part where the placeholder's metadata is
// smaller (the shrink-shapes pass halves dimensions; the values stay the captured ones).
Expected<at::Tensor> ShapedFor(const ir::Node& p, const at::Tensor& t) {
  if (p.meta.size() != 1 || !p.meta[0] || p.meta[0]->shape == t.sizes().vec()) return t;
  const auto& shape = p.meta[0]->shape;
  if (shape.size() != static_cast<size_t>(t.dim()))
    return Error::Internal("minify: placeholder " + p.name() + " has rank " + std::to_string(shape.size()) + ", its value " +
                           std::to_string(t.dim()));
  at::Tensor out = t;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] > out.size(static_cast<int64_t>(d)))
      return Error::Internal("minify: placeholder " + p.name() + " is larger than its value in dim " + std::to_string(d));
    out = out.narrow(static_cast<int64_t>(d), 0, shape[d]);
  }
  return out.contiguous();
}

// Every node target of `g` and of the subgraphs below it.
void CalledTargets(const ir::Graph& g, std::set<std::string>& out) {
  for (const ir::Node* n : g.nodes()) out.insert(n->target());
  for (const auto& [name, sub] : g.subgraphs) CalledTargets(*sub, out);
}

}  // namespace

std::optional<std::vector<std::pair<std::string, at::Tensor>>> CandidateWriter::CutTangents(const ir::Graph& g) const {
  auto first = tensors_.lower_bound("vjp/");
  if (first == tensors_.end() || first->first.rfind("vjp/", 0) != 0) return std::nullopt;  // no backward known
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const ir::Node* n : g.OutputValues()) {
    auto it = tensors_.find("vjp/" + n->name());
    const bool floating = n->meta.size() == 1 && n->meta[0] && c10::isFloatingType(n->meta[0]->dtype);
    if (!floating || it == tensors_.end()) {  // a value the original did not differentiate
      out.emplace_back("", at::Tensor());
      continue;
    }
    auto fitted = ShapedFor(*n, it->second);  // the leading part, where shrink-shapes made it smaller
    if (!fitted.ok() || fitted->scalar_type() != n->meta[0]->dtype) return std::nullopt;
    out.emplace_back(it->first, std::move(*fitted));
  }
  return out;  // none set: the original's backward reaches none of them, so only their values count
}

Status CandidateWriter::Write(const ir::Graph& g, const fs::path& dir, const nlohmann::json& failure) const {
  GraphEntry e;
  e.name = graph_name_;
  e.file = "graphs/" + graph_name_ + ".json";
  e.graph = g.Clone();
  std::vector<std::string> outputs;
  for (const ir::Node* n : g.OutputValues()) outputs.push_back(n->name());
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  std::set<std::string> seen;
  if (outputs == output_nodes_) {
    e.tangents = tangents_;
  } else if (manifest_.mode == "train" && !store_outputs_) {  // (a judge of stored outputs runs forward only)
    if (auto cut = CutTangents(g)) {
      for (auto& [key, t] : *cut) {
        e.tangents.push_back(key);
        if (!key.empty() && seen.insert(key).second) tensors.emplace_back(key, std::move(t));
      }
    } else {
      PARITY_ASSIGN_OR_RETURN(e.graph, WithSumLoss(g, outputs));
    }
  }
  if (requires_grad_) {
    e.requires_grad.emplace();
    for (const ir::Node* n : g.nodes())
      if (((n->kind() == ir::NodeKind::kPlaceholder && requires_grad_->count(n->name())) ||
           (n->kind() == ir::NodeKind::kGetAttr && requires_grad_->count(n->target()))))
        e.requires_grad->insert(n->kind() == ir::NodeKind::kPlaceholder ? n->name() : n->target());
  }
  auto add = [&](const std::string& key, const ir::Node* placeholder) -> Status {
    auto it = tensors_.find(key);
    if (it == tensors_.end()) return Error::Internal("minify: no value for tensor \"" + key + "\"");
    if (!seen.insert(key).second) return Status::Ok();
    if (placeholder == nullptr) {
      tensors.emplace_back(key, it->second);
      return Status::Ok();
    }
    PARITY_ASSIGN_OR_RETURN(at::Tensor value, ShapedFor(*placeholder, it->second));
    tensors.emplace_back(key, std::move(value));
    return Status::Ok();
  };
  for (const auto& key : e.tangents)
    if (!key.empty()) PARITY_RETURN_IF_ERROR(add(key, nullptr));
  for (const ir::Node* n : e.graph.nodes()) {
    if (n->kind() == ir::NodeKind::kPlaceholder && !n->sym.empty()) continue;  // bound from the symbols
    if (n->kind() == ir::NodeKind::kPlaceholder) {
      e.inputs[n->name()] = KeyFor(n->name());
      PARITY_RETURN_IF_ERROR(add(e.inputs[n->name()], n));
    } else if (n->kind() == ir::NodeKind::kGetAttr) {
      PARITY_RETURN_IF_ERROR(add(n->target(), nullptr));
    }
  }
  if (store_outputs_)
    for (const ir::Node* n : g.OutputValues()) {
      const std::string key = n->kind() == ir::NodeKind::kPlaceholder ? KeyFor(n->name()) : "ref/" + n->name();
      e.expected_outputs.push_back(key);
      PARITY_RETURN_IF_ERROR(add(key, nullptr));
    }
  Manifest m = manifest_;
  m.failure = failure;
  // Only the host ops the candidate still calls: one cut away needs no module (nor its approval).
  std::set<std::string> called;
  CalledTargets(e.graph, called);
  for (auto it = m.host_ops.begin(); it != m.host_ops.end();) it = called.count(it->first) ? std::next(it) : m.host_ops.erase(it);
  RemoveAll(dir);
  return WriteReproDir(dir, m, {&e}, tensors);
}

namespace {

// "vjp/<node>": the gradient each value got in the original's backward (its recorded tangents',
// or its loss's; zeros where that backward gave a differentiated value none), by the reference's
// train run of `graph` (the entry's own, or its subgraph calls inlined). A backward the
// interpreter cannot run adds none: candidates then fall back to a sum() loss (CandidateWriter::Write).
Status AddValueGradients(const ReproDir& repro, const GraphEntry& entry, const ir::Graph& graph, const interp::Program& program,
                         const std::string& device, std::map<std::string, at::Tensor>& pool) {
  const GraphEntry e = entry.WithGraph(graph.Clone());
  std::map<std::string, at::Tensor> grads;
  experiment::ReferenceOptions ro;
  ro.device = c10::Device(device);
  ro.value_grads = &grads;
  if (auto run = experiment::RunReference(program, repro, e, "train", ro); !run.ok()) return run.error();
  for (auto& [name, g] : grads)
    if (!pool.count("vjp/" + name)) pool["vjp/" + name] = std::move(g);
  return Status::Ok();
}

// What a cut's values get where the original's backward did not run, said once.
void SayNoGradients(const Status& st, std::ostream* log) {
  if (!st.ok() && log != nullptr)
    *log << "train cuts: the original's backward did not run in the interpreter (" << st.error().message
         << "); a cut's values get a sum() as their loss\n";
}

}  // namespace

Status AddReferenceValues(const ReproDir& repro, const GraphEntry& entry, const std::string& device,
                          std::map<std::string, at::Tensor>& pool, std::ostream* log) {
  PARITY_ASSIGN_OR_RETURN(auto program, interp::Program::Compile(entry.graph, (repro.root() / entry.file).string()));
  interp::RunOptions ro;
  ro.record_all = true;
  ro.device = c10::Device(device);
  PARITY_ASSIGN_OR_RETURN(auto inputs, repro.Inputs(entry));
  PARITY_ASSIGN_OR_RETURN(auto attrs, repro.Attrs(entry));
  PARITY_ASSIGN_OR_RETURN(auto ref, program.Run(inputs, attrs, ro));
  for (auto& [name, v] : ref.values)
    if (v.isTensor()) pool["ref/" + name] = v.toTensor().detach().to(at::kCPU);
  const bool train = (entry.mode.empty() ? repro.manifest().mode : entry.mode) == "train" && entry.backward_of.empty();
  if (train) SayNoGradients(AddValueGradients(repro, entry, entry.graph, program, device, pool), log);
  // The values inside its cond, invoke_subgraph and checkpoint calls too, by the names their
  // inlined nodes take (passes/inline_subgraphs.cpp): what cuts inside an inlined call read.
  if (!InlinableSubgraphCalls(entry.graph).empty()) {
    const ir::Graph inlined = InlineAllSubgraphs(entry.graph);
    PARITY_ASSIGN_OR_RETURN(auto p2, interp::Program::Compile(inlined, (repro.root() / entry.file).string() + " (inlined)"));
    PARITY_ASSIGN_OR_RETURN(auto ref2, p2.Run(inputs, attrs, ro));
    for (auto& [name, v] : ref2.values)
      if (v.isTensor() && !pool.count("ref/" + name)) pool["ref/" + name] = v.toTensor().detach().to(at::kCPU);
    if (train) (void)AddValueGradients(repro, entry, inlined, p2, device, pool);  // (the graph's own said it)
  }
  return Status::Ok();
}

DirJudge BackendJudge(experiment::ExperimentRunner& runner, experiment::ExperimentSpec base, Signature original, fs::path scratch) {
  auto serial = std::make_shared<int>(0);
  return [&runner, base = std::move(base), original = std::move(original), scratch = std::move(scratch),
          serial](const std::vector<fs::path>& dirs) {
    experiment::ExperimentBatch batch;
    for (const auto& d : dirs) {
      experiment::ExperimentSpec spec = base;
      spec.repro = fs::absolute(d).string();
      batch.emplace_back(spec, scratch / ("run" + std::to_string((*serial)++)));
    }
    auto results = runner.RunMany(std::move(batch));
    std::vector<bool> out;
    for (const auto& r : results) out.push_back(Signature::FromResult(r).Matches(original));
    return out;
  };
}

DirJudge CheckCommandJudge(std::string command, int jobs, int timeout_s) {
  return [command = std::move(command), jobs = std::max(1, jobs), timeout_s](const std::vector<fs::path>& dirs) {
    std::vector<bool> out(dirs.size(), false);
    for (size_t first = 0; first < dirs.size(); first += static_cast<size_t>(jobs)) {
      std::vector<std::pair<size_t, Child>> running;
      for (size_t i = first; i < std::min(dirs.size(), first + static_cast<size_t>(jobs)); ++i) {
        SpawnOptions so;
        so.env.push_back("PARITY_CANDIDATE=" + fs::absolute(dirs[i]).string());
        auto child = Child::Spawn({"/bin/sh", "-c", command + " \"$PARITY_CANDIDATE\""}, so);
        if (child.ok()) running.emplace_back(i, std::move(*child));
      }
      // One deadline for the wave; each child is waited for in turn against it.
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
      for (auto& [i, child] : running) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        ExitInfo e = child.Wait(std::max(left, std::chrono::milliseconds(0)));
        out[i] = e.exited && e.code == 0;
      }
    }
    return out;
  };
}

std::vector<bool> CandidateTest::Test(const std::vector<const ir::Graph*>& candidates) {
  std::vector<bool> out(candidates.size(), false);
  std::vector<fs::path> dirs;
  std::vector<size_t> which;
  std::vector<std::string> keys(candidates.size());
  for (size_t i = 0; i < candidates.size(); ++i) {
    keys[i] = ir::GraphToJson(*candidates[i]).dump();
    if (auto it = cache_.find(keys[i]); it != cache_.end()) {
      out[i] = it->second;
      ++cache_hits_;
      continue;
    }
    const fs::path dir = scratch_ / ("cand" + std::to_string(serial_++));
    if (!writer_.Writable(*candidates[i]) || !writer_.Write(*candidates[i], dir, failure_).ok()) {
      cache_[keys[i]] = false;
      continue;
    }
    dirs.push_back(dir);
    which.push_back(i);
  }
  if (dirs.empty()) return out;
  const std::vector<bool> verdicts = judge_(dirs);
  runs_ += static_cast<int>(dirs.size());
  for (size_t b = 0; b < dirs.size(); ++b) {
    out[which[b]] = verdicts[b];
    cache_[keys[which[b]]] = verdicts[b];
  }
  return out;
}

}  // namespace parity::minifier
