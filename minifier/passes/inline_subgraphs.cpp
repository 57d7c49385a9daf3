// inline-subgraphs: a higher-order op whose subgraphs are plain calls is replaced by their nodes,
// so the reduction (and the divergence scan before it, steps/inline_subgraphs.cpp) walks into
// them: invoke_subgraph and tag_activation_checkpoint by their body; cond by both branches,
// each output selected by the predicate (aten::where), which is the cond's value wherever the
// branches compute one. A candidate that no longer fails the same way (a bug in how a backend
// compiles the cond itself) is rejected like any other, so the op stays while it is needed.
// while_loop, flex_attention and the others stay whole.
#include "minifier/passes/passes.h"

#include <map>

namespace parity::minifier {

namespace {

using ir::Arg;
using ir::Graph;
using ir::Node;
using ir::NodeKind;

bool Inlinable(const Node& n) {
  static const std::set<std::string> kinds = {"hop::cond", "hop::invoke_subgraph", "hop::tag_activation_checkpoint"};
  return kinds.count(n.target()) != 0;
}

std::vector<const Node*> Targets(const Graph& g) {
  std::vector<const Node*> out;
  for (const Node* n : g.nodes())
    if (Inlinable(*n)) out.push_back(n);
  return out;
}

// The operands a call gives its subgraph's placeholders, in order.
std::vector<Arg> OperandsOf(const Node& call) {
  std::vector<Arg> out;
  if (call.target() == "hop::cond") {
    const Arg& ops = call.args.at(3);
    if (ops.kind == Arg::Kind::kList) return ops.list;
    return {ops};
  }
  const size_t first = call.target() == "hop::invoke_subgraph" ? 2 : 1;
  for (size_t k = first; k < call.args.size(); ++k) out.push_back(call.args[k]);
  return out;
}

// Copies subgraph `sub`'s nodes into `g` before `call`, names prefixed with the call's (so an
// inline of one call names its nodes as the inline of every call does: reference values by name
// stay valid), placeholders bound to `operands`; its own subgraphs move up, prefixed too.
// Returns the values its output returns.
Expected<std::vector<Arg>> Splice(Graph& g, const Node* call, const Graph& sub, const std::vector<Arg>& operands) {
  const std::string prefix = call->name() + "__";
  std::map<std::string, std::string> renamed_subgraphs;
  for (const auto& [name, s] : sub.subgraphs) {
    const std::string fresh = prefix + name;
    if (g.subgraphs.count(fresh)) return Error::Internal("inline: subgraph \"" + fresh + "\" exists");
    g.subgraphs[fresh] = std::make_unique<Graph>(s->Clone());
    renamed_subgraphs[name] = fresh;
  }
  std::map<const Node*, Arg> value;  // a subgraph node -> what stands for it in g
  const auto placeholders = sub.placeholders();
  if (placeholders.size() != operands.size())
    return Error::BadInput("inline: @" + sub.name() + " takes " + std::to_string(placeholders.size()) + " operands, the call gives " +
                           std::to_string(operands.size()));
  for (size_t k = 0; k < placeholders.size(); ++k) value[placeholders[k]] = operands[k];
  std::function<Arg(const Arg&)> remap = [&](const Arg& a) -> Arg {
    if (a.kind == Arg::Kind::kNode) return value.at(a.node);
    if (a.kind == Arg::Kind::kSubgraph) return Arg::Subgraph(renamed_subgraphs.at(a.s));
    Arg out = a;
    for (auto& x : out.list) x = remap(x);
    return out;
  };
  std::vector<Arg> returned;
  for (const Node* n : sub.nodes()) {
    if (n->kind() == NodeKind::kPlaceholder) continue;
    if (n->kind() == NodeKind::kOutput) {
      for (const auto& a : n->args) {
        Arg r = remap(a);
        if (r.kind == Arg::Kind::kList)
          returned.insert(returned.end(), r.list.begin(), r.list.end());
        else
          returned.push_back(r);
      }
      continue;
    }
    Node* c = g.InsertBefore(call, n->kind(), g.FreshName(prefix + n->name()), n->target());
    for (const auto& a : n->args) c->args.push_back(remap(a));
    for (const auto& [k, a] : n->kwargs) c->kwargs.emplace_back(k, remap(a));
    c->meta = n->meta;
    c->sym = n->sym;
    c->sym_type = n->sym_type;
    c->stack_trace = n->stack_trace;
    c->module_path = n->module_path;
    value[n] = Arg::Ref(c);
  }
  return returned;
}

// The call's results: for cond, each output of the taken branch picked by the predicate.
Expected<std::vector<Arg>> Inline(Graph& g, const Node* call) {
  const std::vector<Arg> operands = OperandsOf(*call);
  if (call->target() != "hop::cond") {
    const Graph* body = g.Subgraph(call->args.at(0).s);
    if (!body) return Error::BadInput("inline: no subgraph @" + call->args.at(0).s);
    return Splice(g, call, *body, operands);
  }
  const Graph* yes = g.Subgraph(call->args.at(1).s);
  const Graph* no = g.Subgraph(call->args.at(2).s);
  if (!yes || !no) return Error::BadInput("inline: a branch of " + call->name() + " is missing");
  PARITY_ASSIGN_OR_RETURN(auto t, Splice(g, call, *yes, operands));
  PARITY_ASSIGN_OR_RETURN(auto f, Splice(g, call, *no, operands));
  if (t.size() != f.size()) return Error::BadInput("inline: the branches of " + call->name() + " return different counts");
  Arg pred = call->args.at(0);
  if (pred.kind == Arg::Kind::kNode && !pred.node->sym.empty()) {  // a SymBool: where() wants a tensor
    Node* p = g.InsertBefore(call, NodeKind::kCallFunction, g.FreshName(call->name() + "__pred"), "aten::scalar_tensor");
    p->args = {pred};
    p->kwargs = {{"dtype", Arg::Dtype(c10::ScalarType::Bool)}};
    pred = Arg::Ref(p);
  }
  std::vector<Arg> out;
  for (size_t k = 0; k < t.size(); ++k) {
    Node* w = g.InsertBefore(call, NodeKind::kCallFunction, g.FreshName(call->name() + "__where_" + std::to_string(k)),
                             "aten::where.self");
    w->args = {pred, t[k], f[k]};
    if (k < call->meta.size()) w->meta = {call->meta[k]};
    out.push_back(Arg::Ref(w));
  }
  return out;
}

}  // namespace

std::vector<std::string> InlinableSubgraphCalls(const Graph& g) {
  std::vector<std::string> out;
  for (const Node* n : Targets(g)) out.push_back(n->name());
  return out;
}

std::optional<Graph> InlineSubgraphs(const Graph& g, const std::set<std::string>& calls) {
  Graph out = g.Clone();
  for (const auto& name : calls) {
    const Node* call = out.Find(name);
    if (!call || !Inlinable(*call)) return std::nullopt;
    auto results = Inline(out, call);
    if (!results.ok()) return std::nullopt;
    // getitem(call, k) -> result k; the call and its getitems go.
    std::set<const Node*> doomed = {call};
    for (Node* n : out.nodes()) {
      if (n->target() != ir::kGetItem || n->args[0].node != call) continue;
      const int64_t k = n->args[1].i;
      if (k < 0 || static_cast<size_t>(k) >= results->size()) return std::nullopt;
      const Arg& r = (*results)[static_cast<size_t>(k)];
      if (r.kind != Arg::Kind::kNode) return std::nullopt;  // a constant result: not expressible as a value
      out.ReplaceAllUses(n, r.node);
      doomed.insert(n);
    }
    for (const Node* n : out.nodes())
      for (const Node* in : n->Inputs())
        if (in == call && !doomed.count(n)) return std::nullopt;  // read other than by getitem
    out.Erase(doomed);
  }
  out.PruneSubgraphs();
  if (!out.Lint().ok()) return std::nullopt;
  return out;
}

Graph InlineAllSubgraphs(const Graph& g) {
  Graph out = g.Clone();
  for (int round = 0; round <= ir::kMaxSubgraphDepth; ++round) {  // a branch's own calls come up one level a round
    const auto calls = InlinableSubgraphCalls(out);
    if (calls.empty()) break;
    auto next = InlineSubgraphs(out, {calls.begin(), calls.end()});
    if (!next) break;
    out = std::move(*next);
  }
  return out;
}

DeltaPass InlineSubgraphsPass() {
  return {"inline-subgraphs", "replace a cond, invoke_subgraph or checkpoint call by its subgraphs' nodes",
          [](const Graph& g) { return static_cast<int>(Targets(g).size()); },
          [](const Graph& g, int begin, int end) -> std::optional<Graph> {
            const auto calls = InlinableSubgraphCalls(g);
            std::set<std::string> chosen;
            for (int i = begin; i < end && i < static_cast<int>(calls.size()); ++i) chosen.insert(calls[i]);
            return InlineSubgraphs(g, chosen);
          }};
}

}  // namespace parity::minifier
