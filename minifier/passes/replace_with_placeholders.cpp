// replace-with-placeholders: a block of op nodes is cut out; every value of the block that a
// remaining node reads becomes a placeholder fed with the reference's concrete value (what
// PyTorch's minifier calls delta debugging). Ancestors only the block read die with it.
#include "minifier/passes/passes.h"

namespace parity::minifier {

std::optional<ir::Graph> CutNodes(const ir::Graph& g, const std::set<const ir::Node*>& cut) {
  std::set<std::string> keep;
  for (const ir::Node* n : g.nodes())
    if (!cut.count(n) && n->kind() != ir::NodeKind::kOutput) keep.insert(n->name());
  // getitem nodes of a cut tuple-valued op would read a tuple: cut them too.
  for (const ir::Node* n : g.nodes())
    if (n->kind() == ir::NodeKind::kCallFunction && n->target() == ir::kGetItem && cut.count(n->args[0].node))
      keep.erase(n->name());
  std::vector<std::string> outputs;
  for (const ir::Node* o : g.OutputValues()) outputs.push_back(o->name());
  auto sub = g.Extract(keep, outputs);
  if (!sub.ok()) return std::nullopt;
  return Cleaned(std::move(*sub));
}

DeltaPass ReplaceWithPlaceholdersPass() {
  return {"replace-with-placeholders", "cut blocks of op nodes, feeding their values as placeholders",
          [](const ir::Graph& g) { return static_cast<int>(g.ops().size()); },
          [](const ir::Graph& g, int begin, int end) -> std::optional<ir::Graph> {
            auto ops = g.ops();
            std::set<const ir::Node*> cut;
            for (int i = begin; i < end; ++i) cut.insert(ops[i]);
            return CutNodes(g, cut);
          }};
}

}  // namespace parity::minifier
