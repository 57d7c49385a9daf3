// shrink-shapes: halves dimensions of the graph's tensor inputs, so a minimal repro is small in
// data too; collapse-dims, run first, tries an input's dimensions straight at 1 (one run where a
// failure does not depend on sizes, as most wrong-code bugs do not, instead of one per halving).
// A target is one placeholder with a dimension > 1 (collapse-dims: all its dimensions at once)
// or one such dimension (shrink-shapes); a candidate shrinks each of its targets and recomputes every node's metadata by running
// the graph in the interpreter on zeros of the new shapes (no backend; not meta tensors: many ATen ops have their meta kernels
// only in Python): a candidate whose ops refuse the new shapes (a view to a fixed shape, operands that no longer broadcast) is
// not expressible and never reaches the backend. The candidate's writer slices each input and reference value to its
// placeholder's new shape (the leading part of every dimension), so the values stay the captured ones.
#include <ATen/ATen.h>

#include "interpreter/interpreter.h"
#include "minifier/passes/passes.h"

namespace parity::minifier {

namespace {

struct Target {
  std::string placeholder;
  std::vector<size_t> dims;
};

// Per dimension (> 1) of each placeholder, or (`whole`) per placeholder with all such dimensions.
std::vector<Target> Targets(const ir::Graph& g, bool whole) {
  std::vector<Target> out;
  for (const ir::Node* p : g.placeholders()) {
    if (p->meta.size() != 1 || !p->meta[0]) continue;
    std::vector<size_t> dims;
    for (size_t d = 0; d < p->meta[0]->shape.size(); ++d)
      if (p->meta[0]->shape[d] > 1) dims.push_back(d);
    if (whole && !dims.empty()) out.push_back({p->name(), dims});
    if (!whole)
      for (size_t d : dims) out.push_back({p->name(), {d}});
  }
  return out;
}

std::vector<int64_t> ContiguousStrides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) strides[i - 1] = strides[i] * std::max<int64_t>(shape[i], 1);
  return strides;
}

// Zeros, not uninitialized memory: index inputs must stay in range.
at::Tensor ZerosOf(const ir::TensorMeta& m) { return at::zeros(m.shape, at::TensorOptions().dtype(m.dtype)); }

std::optional<ir::TensorMeta> MetaOf(const c10::IValue& v) {
  if (!v.isTensor()) return std::nullopt;
  const at::Tensor& t = v.toTensor();
  return ir::TensorMeta{t.scalar_type(), t.sizes().vec(), t.strides().vec()};
}

}  // namespace

Status PropagateMeta(ir::Graph& g) {
  interp::TensorMap inputs, attrs;
  for (const ir::Node* n : g.nodes()) {
    if (n->kind() != ir::NodeKind::kPlaceholder && n->kind() != ir::NodeKind::kGetAttr) continue;
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
      n->meta = {MetaOf(v)};
    } else if (v.isTuple() || v.isList()) {
      const auto elems = v.isTuple() ? v.toTupleRef().elements().vec() : v.toList().vec();
      n->meta.clear();
      for (const auto& e : elems) n->meta.push_back(MetaOf(e));
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
            for (int i = begin; i < end && i < static_cast<int>(targets.size()); ++i) {
              ir::TensorMeta& m = *c.Find(targets[i].placeholder)->meta[0];
              for (size_t d : targets[i].dims) m.shape[d] = shrink(m.shape[d]);
              m.stride = ContiguousStrides(m.shape);  // the writer's slices are contiguous copies
            }
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
