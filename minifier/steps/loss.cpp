#include "minifier/steps/loss.h"

namespace parity::minifier {

Expected<ir::Graph> WithSumLoss(const ir::Graph& g, const std::vector<std::string>& values) {
  ir::Graph c = g.Clone();
  if (ir::Node* out = c.output()) c.Erase({out});
  ir::Node* loss = nullptr;
  std::vector<ir::Arg> outputs{ir::Arg()};  // [0]: the loss, set below
  for (const auto& name : values) {
    ir::Node* v = c.Find(name);
    if (v == nullptr) return Error::Internal("minify: no value named " + name);
    outputs.push_back(ir::Arg::Ref(v));
    if (v->meta.size() != 1 || !v->meta[0] || !c10::isFloatingType(v->meta[0]->dtype)) continue;
    const ir::TensorMeta scalar{v->meta[0]->dtype, {}, {}};
    ir::Node* s = c.Append(ir::NodeKind::kCallFunction, c.FreshName("loss_sum"), "aten::sum");
    s->args = {ir::Arg::Ref(v)};
    s->meta = {scalar};
    if (loss != nullptr) {
      ir::Node* add = c.Append(ir::NodeKind::kCallFunction, c.FreshName("loss_add"), "aten::add.Tensor");
      add->args = {ir::Arg::Ref(loss), ir::Arg::Ref(s)};
      add->meta = {ir::TensorMeta{c10::promoteTypes(loss->meta[0]->dtype, scalar.dtype), {}, {}}};
      s = add;
    }
    loss = s;
  }
  if (loss == nullptr) return Error::Unsupported("minify: no floating value to make a loss of");
  outputs[0] = ir::Arg::Ref(loss);
  c.Append(ir::NodeKind::kOutput, "output", "output")->args = {ir::Arg::List(std::move(outputs))};
  PARITY_RETURN_IF_ERROR(c.Lint());
  return c;
}

}  // namespace parity::minifier
