#include "repro/graph.h"

#include <algorithm>
#include <functional>
#include <sstream>
#include <unordered_set>

#include "repro/sym_expr.h"

namespace parity::ir {

const char* ToString(NodeKind kind) {
  switch (kind) {
    case NodeKind::kPlaceholder: return "placeholder";
    case NodeKind::kGetAttr: return "get_attr";
    case NodeKind::kCallFunction: return "call_function";
    case NodeKind::kOutput: return "output";
  }
  return "?";
}

bool TensorMeta::symbolic() const {
  return std::any_of(sym_shape.begin(), sym_shape.end(), [](const std::string& d) { return !d.empty(); });
}

bool IsSymTarget(const std::string& target) { return target.rfind(kSymNamespace, 0) == 0; }

int64_t TensorMeta::numel() const {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

std::vector<Node*> Node::Inputs() const {
  std::vector<Node*> out;
  for (const auto& a : args) a.ForEachRef([&](Node* n) { out.push_back(n); });
  for (const auto& kv : kwargs) kv.second.ForEachRef([&](Node* n) { out.push_back(n); });
  return out;
}

std::pair<std::string, std::string> Node::OperatorName() const { return SplitOperatorName(target_); }

std::vector<std::string> Node::SubgraphNames() const {
  std::vector<std::string> out;
  for (const auto& a : args) a.ForEachSubgraph([&](const std::string& s) { out.push_back(s); });
  for (const auto& kv : kwargs) kv.second.ForEachSubgraph([&](const std::string& s) { out.push_back(s); });
  return out;
}

const Graph* Graph::Subgraph(const std::string& name) const {
  auto it = subgraphs.find(name);
  return it == subgraphs.end() ? nullptr : it->second.get();
}

int Graph::SubgraphDepth() const {
  int depth = 0;
  for (const auto& [name, g] : subgraphs) depth = std::max(depth, 1 + g->SubgraphDepth());
  return depth;
}

void Graph::PruneSubgraphs() {
  std::set<std::string> used;
  for (const auto& n : nodes_)
    for (const auto& s : n->SubgraphNames()) used.insert(s);
  for (auto it = subgraphs.begin(); it != subgraphs.end();) it = used.count(it->first) ? std::next(it) : subgraphs.erase(it);
}

namespace {
// The symbols `text` reads into `out`; false when it does not parse.
bool ReadSymbols(const std::string& text, std::set<std::string>& out) {
  if (text.empty()) return true;
  auto e = sym::Expr::Parse(text, "a size expression");
  if (!e.ok()) return false;
  for (const auto& s : e->Symbols()) out.insert(s);
  return true;
}

// The symbols every value of `g` and of its subgraphs reads; false when an expression does not parse.
bool ValueSymbols(const Graph& g, std::set<std::string>& out) {
  for (const Node* n : g.nodes()) {
    if (!ReadSymbols(n->sym, out)) return false;
    for (const auto& m : n->meta)
      if (m)
        for (const auto& d : m->sym_shape)
          if (!ReadSymbols(d, out)) return false;
  }
  for (const auto& [name, sub] : g.subgraphs)
    if (!ValueSymbols(*sub, out)) return false;
  return true;
}
}  // namespace

void Graph::PruneSymbols() {
  if (symbols.empty()) return;
  std::set<std::string> read;
  if (!ValueSymbols(*this, read)) return;
  std::vector<std::set<std::string>> guard_reads(guards.size());
  for (size_t i = 0; i < guards.size(); ++i)
    if (!ReadSymbols(guards[i], guard_reads[i])) return;
  auto meets = [&read](const std::set<std::string>& s) {
    return std::any_of(s.begin(), s.end(), [&read](const std::string& x) { return read.count(x) != 0; });
  };
  for (bool grew = true; grew;) {  // a guard relating a read symbol to others keeps them too
    grew = false;
    for (const auto& gr : guard_reads)
      if (meets(gr))
        for (const auto& x : gr) grew |= read.insert(x).second;
  }
  std::vector<std::string> kept;
  for (size_t i = 0; i < guards.size(); ++i)
    if (guard_reads[i].empty() || meets(guard_reads[i])) kept.push_back(guards[i]);
  guards = std::move(kept);
  for (auto it = symbols.begin(); it != symbols.end();) it = read.count(it->first) ? std::next(it) : symbols.erase(it);
}

std::pair<std::string, std::string> SplitOperatorName(const std::string& t) {
  auto sep = t.find("::");
  auto dot = t.find('.', sep == std::string::npos ? 0 : sep + 2);
  if (dot == std::string::npos) return {t, ""};
  std::string overload = t.substr(dot + 1);
  if (overload == "default") overload.clear();
  return {t.substr(0, dot), overload};
}

bool Node::HasSideEffects() const {
  if (!IsOp()) return false;
  // aten::_assert_async, _assert_scalar, _assert_tensor_metadata, ... (FX's impure ops).
  return target_.find("::_assert") != std::string::npos;
}

Node* Graph::Append(NodeKind kind, std::string name, std::string target) {
  nodes_.push_back(std::unique_ptr<Node>(new Node(kind, std::move(name), std::move(target))));
  Node* n = nodes_.back().get();
  n->index_ = nodes_.size() - 1;
  by_name_[n->name()] = n;
  return n;
}

Node* Graph::InsertPlaceholder(std::string name) {
  auto pos = std::find_if(nodes_.begin(), nodes_.end(),
                          [](const std::unique_ptr<Node>& n) { return n->kind() != NodeKind::kPlaceholder; });
  std::string target = name;
  auto it = nodes_.insert(pos, std::unique_ptr<Node>(new Node(NodeKind::kPlaceholder, std::move(name), std::move(target))));
  Node* n = it->get();
  by_name_[n->name()] = n;
  Reindex();
  return n;
}

Node* Graph::InsertBefore(const Node* pos, NodeKind kind, std::string name, std::string target) {
  auto at = std::find_if(nodes_.begin(), nodes_.end(), [pos](const std::unique_ptr<Node>& n) { return n.get() == pos; });
  auto it = nodes_.insert(at, std::unique_ptr<Node>(new Node(kind, std::move(name), std::move(target))));
  Node* n = it->get();
  by_name_[n->name()] = n;
  Reindex();
  return n;
}

void Graph::Reindex() {
  for (size_t i = 0; i < nodes_.size(); ++i) nodes_[i]->index_ = i;
}

Node* Graph::Find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

Node* Graph::output() const {
  for (auto it = nodes_.rbegin(); it != nodes_.rend(); ++it)
    if ((*it)->kind() == NodeKind::kOutput) return it->get();
  return nullptr;
}

std::vector<Node*> Graph::nodes() const {
  std::vector<Node*> out;
  for (const auto& n : nodes_) out.push_back(n.get());
  return out;
}

std::vector<Node*> Graph::placeholders() const {
  std::vector<Node*> out;
  for (const auto& n : nodes_)
    if (n->kind() == NodeKind::kPlaceholder) out.push_back(n.get());
  return out;
}

std::vector<Node*> Graph::ops() const {
  std::vector<Node*> out;
  for (const auto& n : nodes_)
    if (n->IsOp()) out.push_back(n.get());
  return out;
}

std::vector<Node*> Graph::OutputValues() const {
  std::vector<Node*> out;
  if (Node* o = output()) o->Inputs().swap(out);
  return out;
}

std::string Graph::FreshName(const std::string& base) const {
  if (!Find(base)) return base;
  for (int k = 1;; ++k) {
    std::string cand = base + "_" + std::to_string(k);
    if (!Find(cand)) return cand;
  }
}

Status Graph::Lint() const {
  const std::string where = "graph \"" + name_ + "\"";
  std::unordered_map<const Node*, size_t> position;
  std::unordered_set<std::string> names;
  bool seen_non_placeholder = false;
  size_t outputs = 0;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Node* n = nodes_[i].get();
    const std::string nw = where + ": node \"" + n->name() + "\"";
    if (n->name().empty()) return Error::BadInput(where + ": node " + std::to_string(i) + " has no name");
    if (!names.insert(n->name()).second) return Error::BadInput(nw + ": duplicate node name");
    if (n->index() != i) return Error::Internal(nw + ": stale index");
    auto found = by_name_.find(n->name());
    if (found == by_name_.end() || found->second != n) return Error::Internal(nw + ": name table out of date");
    if (n->kind() == NodeKind::kPlaceholder) {
      if (seen_non_placeholder) return Error::BadInput(nw + ": placeholder after a non-placeholder node");
    } else {
      seen_non_placeholder = true;
    }
    if (n->kind() == NodeKind::kOutput) {
      ++outputs;
      if (i + 1 != nodes_.size()) return Error::BadInput(nw + ": the output node is not last");
    }
    if ((n->kind() == NodeKind::kCallFunction || n->kind() == NodeKind::kGetAttr) && n->target().empty())
      return Error::BadInput(nw + ": empty target");
    if (n->kind() != NodeKind::kCallFunction && n->kind() != NodeKind::kOutput && (!n->args.empty() || !n->kwargs.empty()))
      return Error::BadInput(nw + ": a " + std::string(ToString(n->kind())) + " node takes no arguments");
    for (const Node* in : n->Inputs()) {
      if (in == nullptr) return Error::BadInput(nw + ": null reference");
      auto p = position.find(in);
      if (p == position.end())
        return Error::BadInput(nw + ": reads \"" + in->name() + "\", which is not an earlier node of this graph");
      if (in->kind() == NodeKind::kOutput) return Error::BadInput(nw + ": reads the output node");
    }
    if (n->kind() == NodeKind::kCallFunction && n->target() == kGetItem) {
      if (n->args.size() != 2 || n->args[0].kind != Arg::Kind::kNode || n->args[1].kind != Arg::Kind::kInt)
        return Error::BadInput(nw + ": getitem takes (node, int)");
    }
    for (const auto& s : n->SubgraphNames()) {
      if (!n->IsHigherOrder()) return Error::BadInput(nw + ": names subgraph \"" + s + "\" but is no higher-order op");
      if (!Subgraph(s)) return Error::BadInput(nw + ": names subgraph \"" + s + "\", which this graph does not hold");
    }
    position[n] = i;
  }
  if (outputs != 1) return Error::BadInput(where + ": has " + std::to_string(outputs) + " output nodes, expected 1");
  for (const auto& [name, g] : subgraphs) {
    if (!g) return Error::Internal(where + ": subgraph \"" + name + "\" is null");
    if (Status st = g->Lint(); !st.ok()) return Error::BadInput(where + ": subgraph \"" + name + "\": " + st.error().message);
  }
  return Status::Ok();
}

namespace {
Arg RemapArg(const Arg& a, const std::unordered_map<const Node*, Node*>& map) {
  Arg out = a;
  out.ForEachRefMut([&](Node*& n) {
    auto it = map.find(n);
    n = it == map.end() ? nullptr : it->second;
  });
  return out;
}
// Appends a copy of `n` to `g`, its references mapped through `map`.
Node* CopyNode(Graph& g, const Node& n, const std::unordered_map<const Node*, Node*>& map) {
  Node* c = g.Append(n.kind(), n.name(), n.target());
  for (const auto& a : n.args) c->args.push_back(RemapArg(a, map));
  for (const auto& [k, a] : n.kwargs) c->kwargs.emplace_back(k, RemapArg(a, map));
  c->meta = n.meta;
  c->sym = n.sym;
  c->sym_type = n.sym_type;
  c->stack_trace = n.stack_trace;
  c->module_path = n.module_path;
  c->iterations = n.iterations;
  return c;
}
}  // namespace

Graph Graph::Clone() const {
  Graph g(name_);
  g.symbols = symbols;
  g.guards = guards;
  for (const auto& [name, sub] : subgraphs) g.subgraphs[name] = std::make_unique<Graph>(sub->Clone());
  std::unordered_map<const Node*, Node*> map;
  for (const auto& n : nodes_) {
    map[n.get()] = CopyNode(g, *n, map);
  }
  return g;
}

void Graph::Erase(const std::set<const Node*>& doomed) {
  if (doomed.empty()) return;
  for (const Node* n : doomed) by_name_.erase(n->name());
  nodes_.erase(
      std::remove_if(nodes_.begin(), nodes_.end(), [&](const std::unique_ptr<Node>& n) { return doomed.count(n.get()) != 0; }),
      nodes_.end());
  Reindex();
}

void Graph::EliminateDeadCode() {
  std::unordered_set<const Node*> live;
  for (auto it = nodes_.rbegin(); it != nodes_.rend(); ++it) {
    const Node* n = it->get();
    bool keep = n->kind() == NodeKind::kOutput || n->kind() == NodeKind::kPlaceholder || n->HasSideEffects() || live.count(n);
    if (!keep) continue;
    live.insert(n);
    for (const Node* in : n->Inputs()) live.insert(in);
  }
  std::set<const Node*> doomed;
  for (const auto& n : nodes_)
    if (!live.count(n.get())) doomed.insert(n.get());
  Erase(doomed);
  PruneSubgraphs();
  PruneSymbols();
}

std::vector<std::string> Graph::RemoveUnusedPlaceholders() {
  std::unordered_set<const Node*> used;
  for (const auto& n : nodes_)
    for (const Node* in : n->Inputs()) used.insert(in);
  std::set<const Node*> doomed;
  std::vector<std::string> names;
  for (const auto& n : nodes_)
    if (n->kind() == NodeKind::kPlaceholder && !used.count(n.get())) {
      doomed.insert(n.get());
      names.push_back(n->name());
    }
  if (doomed.empty()) return names;  // nothing removed: no symbol newly unread
  Erase(doomed);
  PruneSymbols();
  return names;
}

Status Graph::SetOutputs(const std::vector<std::string>& outputs) {
  std::vector<Arg> refs;
  for (const auto& name : outputs) {
    Node* n = Find(name);
    if (!n || n->kind() == NodeKind::kOutput) return Error::BadInput("graph \"" + name_ + "\": no value named \"" + name + "\"");
    refs.push_back(Arg::Ref(n));
  }
  Node* out = output();
  if (!out) out = Append(NodeKind::kOutput, FreshName("output"), "output");
  out->args = {Arg::List(std::move(refs))};
  out->kwargs.clear();
  return Status::Ok();
}

void Graph::ReplaceAllUses(Node* from, Node* to) {
  for (auto& n : nodes_) {
    for (auto& a : n->args)
      a.ForEachRefMut([&](Node*& r) {
        if (r == from) r = to;
      });
    for (auto& kv : n->kwargs)
      kv.second.ForEachRefMut([&](Node*& r) {
        if (r == from) r = to;
      });
  }
}

Expected<Graph> Graph::Prefix(size_t last, const std::vector<std::string>& outputs) const {
  if (last >= nodes_.size()) return Error::BadInput("prefix: node index out of range");
  for (const auto& name : outputs) {
    const Node* n = Find(name);
    if (!n || n->index() > last || n->kind() == NodeKind::kOutput)
      return Error::BadInput("prefix: \"" + name + "\" is not a value at or before node " + std::to_string(last));
  }
  Graph g = Clone();
  std::set<const Node*> doomed;
  for (size_t i = last + 1; i < g.nodes_.size(); ++i) doomed.insert(g.nodes_[i].get());
  if (g.nodes_[last]->kind() == NodeKind::kOutput) doomed.insert(g.nodes_[last].get());
  g.Erase(doomed);
  PARITY_RETURN_IF_ERROR(g.SetOutputs(outputs));
  g.EliminateDeadCode();
  PARITY_RETURN_IF_ERROR(g.Lint());
  return g;
}

Expected<Graph> Graph::Extract(const std::set<std::string>& keep, const std::vector<std::string>& outputs) const {
  for (const auto& name : keep)
    if (!Find(name)) return Error::BadInput("extract: no node named \"" + name + "\"");
  Graph g(name_);
  g.symbols = symbols;
  g.guards = guards;
  for (const auto& [name, sub] : subgraphs) g.subgraphs[name] = std::make_unique<Graph>(sub->Clone());
  std::unordered_map<const Node*, Node*> map;
  // Boundary values (read by a kept node, produced by a dropped one) become placeholders, first.
  std::vector<const Node*> boundary;
  std::unordered_set<const Node*> in_boundary;
  auto kept = [&](const Node* n) { return keep.count(n->name()) != 0; };
  for (const auto& n : nodes_) {
    if (!kept(n.get()) || n->kind() == NodeKind::kOutput) continue;
    for (const Node* in : n->Inputs())
      if (!kept(in) && in_boundary.insert(in).second) boundary.push_back(in);
  }
  for (const auto& name : outputs) {
    const Node* n = Find(name);
    if (n && !kept(n) && in_boundary.insert(n).second) boundary.push_back(n);
  }
  for (const auto& n : nodes_)
    if (n->kind() == NodeKind::kPlaceholder && kept(n.get())) {
      Node* p = g.Append(NodeKind::kPlaceholder, n->name(), n->target());
      p->meta = n->meta;
      p->sym = n->sym;
      p->sym_type = n->sym_type;
      map[n.get()] = p;
    }
  std::sort(boundary.begin(), boundary.end(), [](const Node* a, const Node* b) { return a->index() < b->index(); });
  for (const Node* b : boundary) {
    Node* p = g.Append(NodeKind::kPlaceholder, b->name(), b->name());
    p->meta = b->meta;
    p->sym = b->sym;  // a cut size value stays a size: bound from the symbols, not from a tensor
    p->sym_type = b->sym_type;
    map[b] = p;
  }
  for (const auto& n : nodes_) {
    if (!kept(n.get()) || n->kind() == NodeKind::kPlaceholder || n->kind() == NodeKind::kOutput) continue;
    map[n.get()] = CopyNode(g, *n, map);
  }
  PARITY_RETURN_IF_ERROR(g.SetOutputs(outputs));
  g.PruneSubgraphs();
  g.PruneSymbols();
  PARITY_RETURN_IF_ERROR(g.Lint());
  return g;
}

std::string ModelLine(const std::string& stack_trace) {
  // Frames are 'File "<path>", line <n>, in <fn>' lines, each followed by its code line,
  // outermost first.
  std::istringstream in(stack_trace);
  std::string frame, best;
  for (std::string l; std::getline(in, l);) {
    const size_t f = l.find("File \"");
    if (f != std::string::npos) {
      frame = l.substr(f);
      continue;
    }
    if (frame.empty()) continue;
    const size_t q = frame.find('"', 6);
    const std::string path = q == std::string::npos ? "" : frame.substr(6, q - 6);
    const size_t ln = frame.find(", line ");
    // Not torch's own files, nor generated code ("<eval_with_key>.3": an FX module's forward).
    if (path.find("/torch/") == std::string::npos && !path.empty() && path[0] != '<' && ln != std::string::npos) {
      std::string num = frame.substr(ln + 7);
      num = num.substr(0, num.find(','));
      const std::string code = l.substr(std::min(l.find_first_not_of(' '), l.size()));
      best = path.substr(path.find_last_of('/') + 1) + ":" + num + " " + code;
    }
    frame.clear();
  }
  return best;
}

}  // namespace parity::ir
