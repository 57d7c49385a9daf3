#include "experiment/shapes.h"

#include <ATen/ops/bernoulli.h>
#include <ATen/ops/full.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/add.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/randn.h>
#include <ATen/core/Generator.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>

#include "interpreter/interpreter.h"
#include "util/files.h"

namespace parity::experiment {
namespace fs = std::filesystem;

Expected<int> ParseShapes(const std::string& text) {
  if (text == "recorded") return 0;
  if (text == "sweep") return 3;
  if (text.rfind("sweep=", 0) == 0) {
    try {
      size_t used = 0;
      const int n = std::stoi(text.substr(6), &used);
      if (used == text.size() - 6 && n >= 1 && n <= 64) return n;
    } catch (const std::exception&) {
    }
  }
  return Error::BadInput("--shapes \"" + text + "\": expected recorded, sweep or sweep=N (N from 1 to 64)");
}

std::vector<sym::Bindings> SweepPoints(const ir::Graph& g, int count) {
  sym::Bindings recorded;
  for (const auto& [name, s] : g.symbols)
    if (!s.unbacked) recorded[name] = s.hint;
  // Every symbol scaled together keeps the relations the guards state between them (a sequence
  // length twice another stays twice); the range's low end catches the smallest sizes.
  const std::vector<double> scales = {0.5, 2.0, 1.5, 0.0, 3.0, 0.75, 1.25, 4.0, 0.25, 2.5, 5.0, 6.0, 8.0};
  std::vector<sym::Expr> guards;  // parsed once (the loader checked that they parse); none on data
  for (const auto& text : g.guards)
    if (auto e = sym::Expr::Parse(text, "guard"); e.ok()) {
      const auto read = e->Symbols();
      if (std::all_of(read.begin(), read.end(), [&recorded](const std::string& s) { return recorded.count(s) != 0; }))
        guards.push_back(std::move(*e));
    }
  auto holds = [&guards](const sym::Bindings& b) {
    return std::all_of(guards.begin(), guards.end(), [&b](const sym::Expr& e) {
      auto v = e.Eval(b);
      return v.ok() && *v != 0;
    });
  };
  std::vector<sym::Bindings> points;
  std::set<sym::Bindings> seen = {recorded};
  auto consider = [&](const std::function<int64_t(const ir::Symbol&)>& value) {
    sym::Bindings p;
    for (const auto& [name, s] : g.symbols) {
      if (s.unbacked) continue;  // a value the graph makes from data, never swept
      int64_t v = std::max(value(s), s.min);
      if (s.max) v = std::min(v, *s.max);
      p[name] = v;
    }
    if (seen.count(p) || !holds(p)) return;  // `p` is inside every range by construction
    seen.insert(p);
    points.push_back(std::move(p));
  };
  for (double scale : scales) {
    if (points.size() >= static_cast<size_t>(count)) return points;
    consider([scale](const ir::Symbol& s) {
      return scale == 0.0 ? std::max<int64_t>(s.min, 2) : static_cast<int64_t>(std::llround(static_cast<double>(s.hint) * scale));
    });
  }
  // Past the scales: the hint's neighbours, below and above, out to the count asked for.
  for (int64_t j = 1; points.size() < static_cast<size_t>(count) && j <= 4 * static_cast<int64_t>(count) + 64; ++j)
    for (int64_t sign : {-1, 1})
      if (points.size() < static_cast<size_t>(count)) consider([j, sign](const ir::Symbol& s) { return s.hint + sign * j; });
  return points;
}

std::string PointLabel(const sym::Bindings& point) {
  std::string s;
  for (const auto& [name, v] : point) s += (s.empty() ? "" : ", ") + name + "=" + std::to_string(v);
  return s;
}

uint64_t ShapeSeed(const sym::Bindings& point) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the label
  for (char c : PointLabel(point)) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return h;
}

namespace {

// A tensor of `shape` drawn like `captured`: floating values with its mean and spread, integers
// over its range, booleans with its share of true.
at::Tensor LikeCaptured(const at::Tensor& captured, const std::vector<int64_t>& shape, at::Generator& gen) {
  const auto opts = captured.options().device(at::kCPU);
  if (captured.numel() == 0) return at::zeros(shape, opts);
  if (captured.is_floating_point()) {
    const at::Tensor d = captured.to(at::kCPU).to(at::kDouble);
    const double mean = d.mean().item<double>();
    const double std = captured.numel() > 1 ? d.std().item<double>() : 0.0;
    return at::randn(shape, gen, at::TensorOptions().dtype(at::kDouble)).mul(std).add(mean).to(captured.scalar_type());
  }
  if (captured.scalar_type() == at::kBool) {
    const double ratio = captured.to(at::kCPU).to(at::kDouble).mean().item<double>();
    return at::bernoulli(at::full(shape, ratio, at::TensorOptions().dtype(at::kDouble)), gen).to(at::kBool);
  }
  const at::Tensor l = captured.to(at::kCPU).to(at::kLong);
  const int64_t lo = l.min().item<int64_t>(), hi = l.max().item<int64_t>();
  return at::randint(lo, hi + 1, shape, gen, at::TensorOptions().dtype(at::kLong)).to(captured.scalar_type());
}

}  // namespace

bool TangentsFitEveryShape(const GraphEntry& entry) {
  const ir::Node* out = entry.graph.output();
  if (!entry.has_tangents() || out == nullptr) return true;
  if (out->args.empty()) return false;
  const std::vector<ir::Arg>& values = out->args[0].list;  // the outputs, in order, as tangents are
  for (size_t k = 0; k < entry.tangents.size(); ++k) {
    if (entry.tangents[k].empty()) continue;
    if (k >= values.size() || values[k].kind != ir::Arg::Kind::kNode) return false;
    const auto& meta = values[k].node->meta;
    if (meta.empty() || !meta[0] || meta[0]->symbolic()) return false;
  }
  return true;
}

Status WriteShapeVariant(const ReproDir& repro, const GraphEntry& entry, const sym::Bindings& point, uint64_t seed,
                         const fs::path& dir, bool with_expected) {
  if (!TangentsFitEveryShape(entry))
    return Error::BadInput("graph \"" + entry.name + "\": its recorded gradients have the recorded sizes only");
  GraphEntry e;
  e.name = entry.name;
  e.file = "graphs/" + entry.name + ".json";
  e.mode = entry.mode;
  e.dtype = entry.dtype;
  e.device = entry.device;
  e.amp = entry.amp;
  e.requires_grad = entry.requires_grad;
  e.tangents = entry.tangents;
  e.graph = entry.graph.Clone();
  for (auto& [name, s] : e.graph.symbols)
    if (!s.unbacked) s.hint = point.at(name);
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  std::set<std::string> written;
  for (ir::Node* n : e.graph.nodes()) {
    if (n->kind() == ir::NodeKind::kGetAttr && written.insert(n->target()).second) {
      PARITY_ASSIGN_OR_RETURN(at::Tensor t, repro.Tensor(n->target()));
      tensors.emplace_back(n->target(), t);
    }
    if (n->kind() != ir::NodeKind::kPlaceholder || !n->sym.empty()) continue;
    const std::string key = entry.inputs.at(n->name());
    e.inputs[n->name()] = key;
    PARITY_ASSIGN_OR_RETURN(at::Tensor captured, repro.Tensor(key));
    if (n->meta.empty() || !n->meta[0] || !n->meta[0]->symbolic()) {
      tensors.emplace_back(key, captured);
      continue;
    }
    ir::TensorMeta& m = *n->meta[0];
    std::vector<int64_t> shape = m.shape;
    for (size_t d = 0; d < m.sym_shape.size(); ++d) {
      if (m.sym_shape[d].empty()) continue;
      PARITY_ASSIGN_OR_RETURN(sym::Expr x, sym::Expr::Parse(m.sym_shape[d], "input \"" + n->name() + "\""));
      PARITY_ASSIGN_OR_RETURN(shape[d], x.EvalInt(point));
    }
    m.shape = shape;
    m.stride.clear();  // contiguous at the new sizes
    tensors.emplace_back(key, LikeCaptured(captured, shape, gen));
  }
  for (const std::string& key : e.tangents)
    if (!key.empty() && written.insert(key).second) {
      PARITY_ASSIGN_OR_RETURN(at::Tensor t, repro.Tensor(key));
      tensors.emplace_back(key, t);
    }
  if (with_expected) {
    const std::map<std::string, at::Tensor> by_key(tensors.begin(), tensors.end());
    interp::TensorMap inputs, attrs;
    for (const auto& [ph, key] : e.inputs) inputs[ph] = by_key.at(key);
    for (ir::Node* n : e.graph.nodes())
      if (n->kind() == ir::NodeKind::kGetAttr) attrs[n->target()] = by_key.at(n->target());
    PARITY_ASSIGN_OR_RETURN(auto program, interp::Program::Compile(e.graph, entry.name));
    PARITY_ASSIGN_OR_RETURN(auto run, program.Run(inputs, attrs));
    for (size_t k = 0; k < run.outputs.size(); ++k) {
      if (!run.outputs[k].isTensor()) continue;
      e.expected_outputs.push_back(entry.name + "/output/" + std::to_string(k));
      tensors.emplace_back(e.expected_outputs.back(), run.outputs[k].toTensor().detach().to(at::kCPU));
    }
    e.output_names = entry.output_names;
  }
  RemoveAll(dir);
  Manifest man = repro.manifest();
  man.producer = "parity verify --shapes (" + PointLabel(point) + ")";
  return WriteReproDir(dir, man, {&e}, tensors);
}

}  // namespace parity::experiment
