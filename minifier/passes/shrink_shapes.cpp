// shrink-shapes: halves dimensions of the graph's tensor inputs, so a minimal repro is small in
// data too; collapse-dims, run first, tries an input's dimensions straight at 1 (one run where a
// failure does not depend on sizes, as most wrong-code bugs do not, instead of one per halving).
// A target is one placeholder with a dimension > 1 (collapse-dims: all its dimensions at once)
// or one such dimension (shrink-shapes); a candidate shrinks each of its targets and recomputes every node's metadata by running
// the graph in the interpreter on zeros of the new shapes (no backend; not meta tensors: many ATen ops have their meta kernels
// only in Python): a candidate whose ops refuse the new shapes (a view to a fixed shape, operands that no longer broadcast) is
// not expressible and never reaches the backend. The candidate's writer slices each input and reference value to its
// placeholder's new shape (the leading part of every dimension), so the values stay the captured ones.
// In a symbolic graph a dim sized by a symbol shrinks with its symbol (a target of its own): the
// hint halves (or drops to the range's low end) and every input dim it sizes follows, so each
// candidate is a symbolic graph valid at its new hints.
#include <ATen/ops/zeros.h>

#include "interpreter/interpreter.h"
#include "minifier/passes/passes.h"
#include "repro/sym_expr.h"

namespace parity::minifier {

namespace {

// One placeholder's static dims, or (symbolic graphs) one symbol: its hint shrinks inside its
// range, and every input dim it sizes follows.
struct Target {
  std::string placeholder;
  std::vector<size_t> dims;
  std::string symbol;
};

bool StaticDim(const ir::TensorMeta& m, size_t d) { return d >= m.sym_shape.size() || m.sym_shape[d].empty(); }

// Per static dimension (> 1) of each placeholder, or (`whole`) per placeholder with all such
// dimensions; then per symbol whose hint is above its range's low end.
std::vector<Target> Targets(const ir::Graph& g, bool whole) {
  std::vector<Target> out;
  for (const ir::Node* p : g.placeholders()) {
    if (p->meta.size() != 1 || !p->meta[0]) continue;
    const ir::TensorMeta& m = *p->meta[0];
    std::vector<size_t> dims;
    for (size_t d = 0; d < m.shape.size(); ++d)
      if (m.shape[d] > 1 && StaticDim(m, d)) dims.push_back(d);
    if (whole && !dims.empty()) out.push_back({p->name(), dims, ""});
    if (!whole)
      for (size_t d : dims) out.push_back({p->name(), {d}, ""});
  }
  for (const auto& [name, s] : g.symbols)
    if (!s.unbacked && s.hint > std::max<int64_t>(s.min, 1)) out.push_back({"", {}, name});
  return out;
}

std::vector<int64_t> ContiguousStrides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) strides[i - 1] = strides[i] * std::max<int64_t>(shape[i], 1);
  return strides;
}

// A symbolic graph's input sizes at its symbols' hints.
Status ResizeSymbolicInputs(ir::Graph& g) {
  sym::Bindings hints;
  for (const auto& [name, s] : g.symbols) hints[name] = s.hint;
  for (ir::Node* p : g.placeholders()) {
    if (p->meta.size() != 1 || !p->meta[0] || !p->meta[0]->symbolic()) continue;
    ir::TensorMeta& m = *p->meta[0];
    for (size_t d = 0; d < m.sym_shape.size(); ++d) {
      if (m.sym_shape[d].empty()) continue;
      PARITY_ASSIGN_OR_RETURN(sym::Expr e, sym::Expr::Parse(m.sym_shape[d], p->name()));
      PARITY_ASSIGN_OR_RETURN(m.shape[d], e.EvalInt(hints));
    }
    m.stride = ContiguousStrides(m.shape);
  }
  return Status::Ok();
}

// Zeros, not uninitialized memory: index inputs must stay in range.
at::Tensor ZerosOf(const ir::TensorMeta& m) { return at::zeros(m.shape, at::TensorOptions().dtype(m.dtype)); }

// `v`'s metadata; a dim the old metadata named by a size expression keeps its name.
std::optional<ir::TensorMeta> MetaOf(const c10::IValue& v, const std::optional<ir::TensorMeta>& old) {
  if (!v.isTensor()) return std::nullopt;
  const at::Tensor& t = v.toTensor();
  ir::TensorMeta m{t.scalar_type(), t.sizes().vec(), t.strides().vec()};
  if (old && old->sym_shape.size() == m.shape.size()) m.sym_shape = old->sym_shape;
  return m;
}

}  // namespace

Status PropagateMeta(ir::Graph& g) {
  interp::TensorMap inputs, attrs;
  for (const ir::Node* n : g.nodes()) {
    if (n->kind() != ir::NodeKind::kPlaceholder && n->kind() != ir::NodeKind::kGetAttr) continue;
    if (!n->sym.empty()) continue;  // a size input: bound from the symbols
    if (n->meta.size() != 1 || !n->meta[0]) return Error::Unsupported("node " + n->name() + " has no tensor metadata");
    (n->kind() == ir::NodeKind::kPlaceholder ? inputs[n->name()] : attrs[n->target()]) = ZerosOf(*n->meta[0]);
  }
  PARITY_ASSIGN_OR_RETURN(auto program, interp::Program::Compile(g, "shrink-shapes"));
  interp::RunOptions ro;  // on the CPU, without autograd
  ro.record_all = true;
  PARITY_ASSIGN_OR_RETURN(auto run, program.Run(inputs, attrs, ro));
  for (ir::Node* n : g.nodes()) {
    if (n->kind() != ir::NodeKind::kCallFunction) continue;
    auto it = run.values.find(n->name());
    if (it == run.values.end()) continue;
    const c10::IValue& v = it->second;
    if (v.isTensor()) {
      n->meta = {MetaOf(v, n->meta.empty() ? std::nullopt : n->meta[0])};
    } else if (v.isTuple() || v.isList()) {
      const auto elems = v.isTuple() ? v.toTupleRef().elements().vec() : v.toList().vec();
      std::vector<std::optional<ir::TensorMeta>> metas;
      for (size_t k = 0; k < elems.size(); ++k) metas.push_back(MetaOf(elems[k], k < n->meta.size() ? n->meta[k] : std::nullopt));
      n->meta = std::move(metas);
    }
  }
  return Status::Ok();
}

namespace {

DeltaPass ShrinkPass(std::string name, std::string description, bool whole, int64_t (*shrink)(int64_t)) {
  return {std::move(name), std::move(description),
          [whole](const ir::Graph& g) { return static_cast<int>(Targets(g, whole).size()); },
          [whole, shrink](const ir::Graph& g, int begin, int end) -> std::optional<ir::Graph> {
            const auto targets = Targets(g, whole);
            ir::Graph c = g.Clone();
            bool resized = false;
            for (int i = begin; i < end && i < static_cast<int>(targets.size()); ++i) {
              if (!targets[i].symbol.empty()) {  // inside its range; guards are checked by the run below
                ir::Symbol& s = c.symbols.at(targets[i].symbol);
                s.hint = std::max({shrink(s.hint), s.min, int64_t{1}});
                resized = true;
                continue;
              }
              ir::TensorMeta& m = *c.Find(targets[i].placeholder)->meta[0];
              for (size_t d : targets[i].dims) m.shape[d] = shrink(m.shape[d]);
              m.stride = ContiguousStrides(m.shape);  // the writer's slices are contiguous copies
            }
            if (resized && !ResizeSymbolicInputs(c).ok()) return std::nullopt;
            if (!PropagateMeta(c).ok()) return std::nullopt;
            return c;
          }};
}

}  // namespace

DeltaPass CollapseDimsPass() {
  return ShrinkPass("collapse-dims", "shrink every dimension of an input to 1", true, [](int64_t) -> int64_t { return 1; });
}

DeltaPass ShrinkShapesPass() {
  return ShrinkPass("shrink-shapes", "halve dimensions of the inputs (and of the values read from them)", false,
                    [](int64_t n) -> int64_t { return n / 2; });
}

}  // namespace parity::minifier
