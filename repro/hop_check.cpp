#include "repro/hop_check.h"

#include <map>
#include <optional>

#include "repro/graph_json.h"

namespace parity::ir {

namespace {

// One higher-order call under check: its node, the graph holding it, and how errors name it.
class Call {
 public:
  Call(const Node& n, const Graph& g, std::string op) : n_(n), g_(g), op_(std::move(op)) {}

  Error Bad(const std::string& field, const std::string& what) const {
    return Error::BadInput("graph \"" + g_.name() + "\": node \"" + n_.name() + "\" (hop::" + op_ + "): " +
                           (field.empty() ? "" : "field \"" + field + "\": ") + what);
  }
  static std::string Field(size_t i) { return "args[" + std::to_string(i) + "]"; }

  Status Arity(size_t want, const std::string& signature) const {
    if (n_.args.size() != want)
      return Bad("args", "takes " + std::to_string(want) + " arguments " + signature + ", the call gives " +
                             std::to_string(n_.args.size()));
    return NoSubgraphIn(n_.kwargs);
  }
  Status AtLeast(size_t want, const std::string& signature) const {
    if (n_.args.size() < want) return Bad("args", "takes " + signature + ", the call gives " + std::to_string(n_.args.size()) + " arguments");
    return NoSubgraphIn(n_.kwargs);
  }
  // Keyword arguments are options (a checkpoint's flags): never a subgraph.
  Status NoSubgraphIn(const std::vector<std::pair<std::string, Arg>>& kwargs) const {
    for (const auto& [key, a] : kwargs) {
      bool sub = false;
      a.ForEachSubgraph([&](const std::string&) { sub = true; });
      if (sub) return Bad("kwargs." + key, "a keyword argument names a subgraph; subgraphs are positional");
    }
    return Status::Ok();
  }

  // Argument `i` as a subgraph of this graph (`what` says which: "the true branch").
  Expected<const Graph*> Subgraph(size_t i, const std::string& what) const {
    const Arg& a = n_.args.at(i);
    if (a.kind != Arg::Kind::kSubgraph) return Bad(Field(i), "expected a subgraph (" + what + "), got " + KindName(a));
    const Graph* s = g_.Subgraph(a.s);
    if (!s) return Bad(Field(i), "names subgraph \"" + a.s + "\", which this graph does not hold");
    return s;
  }
  // Argument `i` as operand values (a list, or one value): no subgraph among them.
  Expected<std::vector<const Arg*>> Values(size_t i, const std::string& what) const { return ValuesOf(n_.args.at(i), Field(i), what); }
  Expected<std::vector<const Arg*>> ValuesOf(const Arg& a, const std::string& field, const std::string& what) const {
    bool sub = false;
    a.ForEachSubgraph([&](const std::string&) { sub = true; });
    if (sub) return Bad(field, "expected values (" + what + "), got a subgraph");
    std::vector<const Arg*> out;
    if (a.kind == Arg::Kind::kList)
      for (const Arg& x : a.list) out.push_back(&x);
    else
      out.push_back(&a);
    return out;
  }
  // The operands a subgraph takes must be as many as the call gives it.
  Status Takes(const Graph& s, size_t operands, const std::string& field, const std::string& what) const {
    const size_t takes = s.placeholders().size();
    if (takes != operands)
      return Bad(field, what + " @" + s.name() + " takes " + std::to_string(takes) + " operands, the call gives it " + std::to_string(operands));
    return Status::Ok();
  }
  const Graph* SubgraphNamed(const std::string& name) const { return g_.Subgraph(name); }
  // The value `k` of the op's result, as recorded.
  std::optional<TensorMeta> Result(size_t k) const { return k < n_.meta.size() ? n_.meta[k] : std::nullopt; }
  size_t Results() const { return n_.meta.size(); }
  const Node& node() const { return n_; }

  static std::string KindName(const Arg& a) {
    switch (a.kind) {
      case Arg::Kind::kNode: return "a value (%" + a.node->name() + ")";
      case Arg::Kind::kList: return "a list";
      case Arg::Kind::kString: return "a string";
      case Arg::Kind::kNone: return "None";
      default: return "a constant";
    }
  }

 private:
  const Node& n_;
  const Graph& g_;
  std::string op_;
};

// The recorded meta of a value (a node's only tensor, or a getitem's element), if any.
std::optional<TensorMeta> MetaOf(const Arg& a) {
  if (a.kind != Arg::Kind::kNode || !a.node || a.node->meta.size() != 1) return std::nullopt;
  return a.node->meta[0];
}

// The values a subgraph returns (its output node's list, or its one value).
std::vector<const Arg*> Returns(const Graph& s) {
  std::vector<const Arg*> out;
  const Node* o = s.output();
  if (!o || o->args.empty()) return out;
  const Arg& r = o->args[0];
  if (r.kind == Arg::Kind::kList)
    for (const Arg& x : r.list) out.push_back(&x);
  else
    out.push_back(&r);
  return out;
}

std::string Describe(const TensorMeta& m) {
  std::string dims;
  for (size_t d = 0; d < m.shape.size(); ++d) {
    const bool sym = d < m.sym_shape.size() && !m.sym_shape[d].empty();
    dims += (d ? ", " : "") + (sym ? m.sym_shape[d] : std::to_string(m.shape[d]));
  }
  return TorchDtypeName(m.dtype) + "[" + dims + "]";
}

bool SymDim(const TensorMeta& m, size_t d) { return d < m.sym_shape.size() && !m.sym_shape[d].empty(); }

// Whether two recorded tensors can be the same value: dtype and rank, and every dim static on
// both sides (`skip_leading` drops the first dim of `a`: a slice of it).
bool Fits(const TensorMeta& a, const TensorMeta& b, bool a_sliced = false) {
  if (a.dtype != b.dtype) return false;
  const size_t off = a_sliced ? 1 : 0;
  if (a.shape.size() != b.shape.size() + off) return false;
  for (size_t d = 0; d < b.shape.size(); ++d)
    if (!SymDim(a, d + off) && !SymDim(b, d) && a.shape[d + off] != b.shape[d]) return false;
  return true;
}

// Every value of `got` (what a subgraph returns) against `want` (the op's recorded results, or
// the values it carries), each where both are recorded.
Status SameTypes(const Call& c, const std::vector<const Arg*>& got, const std::vector<std::optional<TensorMeta>>& want,
                 const std::string& field, const std::string& what) {
  for (size_t k = 0; k < got.size() && k < want.size(); ++k) {
    auto g = MetaOf(*got[k]);
    if (g && want[k] && !Fits(*g, *want[k]))
      return c.Bad(field, what + " returns " + Describe(*g) + " as value " + std::to_string(k) + ", where " +
                              Describe(*want[k]) + " is recorded");
  }
  return Status::Ok();
}

std::vector<std::optional<TensorMeta>> MetasOf(const std::vector<const Arg*>& values) {
  std::vector<std::optional<TensorMeta>> out;
  for (const Arg* a : values) out.push_back(MetaOf(*a));
  return out;
}

std::vector<std::optional<TensorMeta>> ResultsOf(const Call& c, size_t from = 0) {
  std::vector<std::optional<TensorMeta>> out;
  for (size_t k = from; k < c.Results(); ++k) out.push_back(c.Result(k));
  return out;
}

// A predicate or condition: a bool/int constant, a symbolic bool or int, or a one-element bool tensor.
Status Boolean(const Call& c, const Arg& a, const std::string& field, const std::string& what) {
  if (a.kind == Arg::Kind::kBool || a.kind == Arg::Kind::kInt) return Status::Ok();
  if (a.kind != Arg::Kind::kNode) return c.Bad(field, what + " must be a bool or a one-element bool tensor, got " + Call::KindName(a));
  if (!a.node->sym.empty()) return Status::Ok();
  if (auto m = MetaOf(a)) {
    if (m->dtype != c10::ScalarType::Bool || m->numel() != 1)
      return c.Bad(field, what + " must be a bool or a one-element bool tensor, the file records " + Describe(*m));
  }
  return Status::Ok();
}

// cond(pred, true_fn, false_fn, operands): both branches take the operands and return the op's
// results.
Status CheckCond(const Call& c) {
  PARITY_RETURN_IF_ERROR(c.Arity(4, "(pred, true_fn, false_fn, operands)"));
  PARITY_ASSIGN_OR_RETURN(auto pred, c.ValuesOf(c.node().args[0], Call::Field(0), "the predicate"));
  if (pred.size() != 1) return c.Bad(Call::Field(0), "the predicate is one value, the call gives a list");
  PARITY_RETURN_IF_ERROR(Boolean(c, *pred[0], Call::Field(0), "the predicate"));
  PARITY_ASSIGN_OR_RETURN(const Graph* yes, c.Subgraph(1, "the true branch"));
  PARITY_ASSIGN_OR_RETURN(const Graph* no, c.Subgraph(2, "the false branch"));
  PARITY_ASSIGN_OR_RETURN(auto operands, c.Values(3, "the operands"));
  PARITY_RETURN_IF_ERROR(c.Takes(*yes, operands.size(), Call::Field(1), "the true branch"));
  PARITY_RETURN_IF_ERROR(c.Takes(*no, operands.size(), Call::Field(2), "the false branch"));
  const auto ry = Returns(*yes), rn = Returns(*no);
  if (ry.size() != rn.size())
    return c.Bad("args[1..2]", "the true branch returns " + std::to_string(ry.size()) + " values, the false branch " +
                                   std::to_string(rn.size()));
  if (c.Results() > 0 && c.Results() != ry.size())
    return c.Bad("meta", "the op's " + std::to_string(c.Results()) + " recorded results, but its branches return " + std::to_string(ry.size()));
  PARITY_RETURN_IF_ERROR(SameTypes(c, ry, ResultsOf(c), Call::Field(1), "the true branch"));
  return SameTypes(c, rn, ResultsOf(c), Call::Field(2), "the false branch");
}

// while_loop(cond_fn, body_fn, carried_inputs, additional_inputs): the condition returns one
// boolean; the body returns the carried values, each of its recorded type; so does the op.
Status CheckWhileLoop(const Call& c) {
  PARITY_RETURN_IF_ERROR(c.Arity(4, "(cond_fn, body_fn, carried_inputs, additional_inputs)"));
  PARITY_ASSIGN_OR_RETURN(const Graph* cond, c.Subgraph(0, "the condition"));
  PARITY_ASSIGN_OR_RETURN(const Graph* body, c.Subgraph(1, "the body"));
  PARITY_ASSIGN_OR_RETURN(auto carried, c.Values(2, "the carried values"));
  PARITY_ASSIGN_OR_RETURN(auto extra, c.Values(3, "the additional inputs"));
  const size_t operands = carried.size() + extra.size();
  PARITY_RETURN_IF_ERROR(c.Takes(*cond, operands, Call::Field(0), "the condition"));
  PARITY_RETURN_IF_ERROR(c.Takes(*body, operands, Call::Field(1), "the body"));
  const auto rc = Returns(*cond);
  if (rc.size() != 1) return c.Bad(Call::Field(0), "the condition returns " + std::to_string(rc.size()) + " values, not one boolean");
  PARITY_RETURN_IF_ERROR(Boolean(c, *rc[0], Call::Field(0), "the condition's value"));
  const auto rb = Returns(*body);
  if (rb.size() != carried.size())
    return c.Bad(Call::Field(1), "the body returns " + std::to_string(rb.size()) + " values for " + std::to_string(carried.size()) +
                                     " carried ones");
  PARITY_RETURN_IF_ERROR(SameTypes(c, rb, MetasOf(carried), Call::Field(1), "the body"));
  if (c.Results() > 0 && c.Results() != carried.size())
    return c.Bad("meta", "the op's " + std::to_string(c.Results()) + " recorded results, but it carries " + std::to_string(carried.size()));
  return SameTypes(c, rb, ResultsOf(c), Call::Field(1), "the body");
}

// The slices a function gets of `xs` along dim 0: each x a tensor of dim >= 1, the function's
// placeholder at `first` + k of x's type less its first dim.
Status Slices(const Call& c, const Graph& f, const std::vector<const Arg*>& xs, size_t first, const std::string& field) {
  const auto phs = f.placeholders();
  std::optional<int64_t> length;
  for (size_t k = 0; k < xs.size(); ++k) {
    auto m = MetaOf(*xs[k]);
    if (!m) continue;
    if (m->shape.empty()) return c.Bad(field, "value " + std::to_string(k) + " is sliced along dim 0 but is " + Describe(*m));
    if (!SymDim(*m, 0)) {
      if (length && *length != m->shape[0])
        return c.Bad(field, "the sliced values differ in length along dim 0 (" + std::to_string(*length) + " and " +
                                std::to_string(m->shape[0]) + ")");
      length = m->shape[0];
    }
    if (first + k < phs.size() && phs[first + k]->meta.size() == 1 && phs[first + k]->meta[0] &&
        !Fits(*m, *phs[first + k]->meta[0], /*a_sliced=*/true))
      return c.Bad(field, "a slice of value " + std::to_string(k) + " (" + Describe(*m) + ") does not fit @" + f.name() + "'s operand \"" +
                              phs[first + k]->name() + "\" (" + Describe(*phs[first + k]->meta[0]) + ")");
  }
  return Status::Ok();
}

// scan(combine_fn, init, xs, additional_inputs): the combine function takes the carry, a slice
// of each xs and the additional inputs, and returns the next carry (the init's types) and a
// value per step; the op returns the last carry and the steps' values stacked.
Status CheckScan(const Call& c) {
  PARITY_RETURN_IF_ERROR(c.Arity(4, "(combine_fn, init, xs, additional_inputs)"));
  PARITY_ASSIGN_OR_RETURN(const Graph* f, c.Subgraph(0, "the combine function"));
  PARITY_ASSIGN_OR_RETURN(auto init, c.Values(1, "the initial carry"));
  PARITY_ASSIGN_OR_RETURN(auto xs, c.Values(2, "the scanned values"));
  PARITY_ASSIGN_OR_RETURN(auto extra, c.Values(3, "the additional inputs"));
  PARITY_RETURN_IF_ERROR(c.Takes(*f, init.size() + xs.size() + extra.size(), Call::Field(0), "the combine function"));
  PARITY_RETURN_IF_ERROR(Slices(c, *f, xs, init.size(), Call::Field(2)));
  const auto r = Returns(*f);
  if (r.size() < init.size())
    return c.Bad(Call::Field(0), "the combine function returns " + std::to_string(r.size()) + " values, fewer than the " +
                                     std::to_string(init.size()) + " of the carry");
  PARITY_RETURN_IF_ERROR(SameTypes(c, std::vector<const Arg*>(r.begin(), r.begin() + static_cast<std::ptrdiff_t>(init.size())),
                                   MetasOf(init), Call::Field(0), "the combine function"));
  if (c.Results() > 0 && c.Results() != r.size())
    return c.Bad("meta", "the op's " + std::to_string(c.Results()) + " recorded results, but its combine function returns " +
                             std::to_string(r.size()) + " values");
  return Status::Ok();
}

// map_impl(f, xs, pos_args): f takes a slice of each xs and the positional arguments.
Status CheckMap(const Call& c) {
  PARITY_RETURN_IF_ERROR(c.Arity(3, "(f, xs, pos_args)"));
  PARITY_ASSIGN_OR_RETURN(const Graph* f, c.Subgraph(0, "the mapped function"));
  PARITY_ASSIGN_OR_RETURN(auto xs, c.Values(1, "the mapped values"));
  PARITY_ASSIGN_OR_RETURN(auto pos, c.Values(2, "the positional arguments"));
  if (xs.empty()) return c.Bad(Call::Field(1), "maps over no value");
  PARITY_RETURN_IF_ERROR(c.Takes(*f, xs.size() + pos.size(), Call::Field(0), "the mapped function"));
  return Slices(c, *f, xs, 0, Call::Field(1));
}

// associative_scan(combine_fn, xs, additional_inputs): combine(*running, *next, *additional)
// returns one value per scanned one.
Status CheckAssociativeScan(const Call& c) {
  PARITY_RETURN_IF_ERROR(c.Arity(3, "(combine_fn, xs, additional_inputs)"));
  PARITY_ASSIGN_OR_RETURN(const Graph* f, c.Subgraph(0, "the combine function"));
  PARITY_ASSIGN_OR_RETURN(auto xs, c.Values(1, "the scanned values"));
  PARITY_ASSIGN_OR_RETURN(auto extra, c.Values(2, "the additional inputs"));
  PARITY_RETURN_IF_ERROR(c.Takes(*f, 2 * xs.size() + extra.size(), Call::Field(0), "the combine function"));
  const auto r = Returns(*f);
  if (r.size() != xs.size())
    return c.Bad(Call::Field(0), "the combine function returns " + std::to_string(r.size()) + " values for " + std::to_string(xs.size()) +
                                     " scanned ones");
  return Status::Ok();
}

// A call of a subgraph on the operands from argument `first` on (invoke_subgraph: subgraph,
// identifier, *operands; tag_activation_checkpoint: body, *operands).
Status CheckCallOf(const Call& c, size_t first, const std::string& signature) {
  PARITY_RETURN_IF_ERROR(c.AtLeast(first, signature));
  PARITY_ASSIGN_OR_RETURN(const Graph* body, c.Subgraph(0, "the called subgraph"));
  for (size_t i = 1; i < c.node().args.size(); ++i) PARITY_RETURN_IF_ERROR(c.Values(i, i < first ? "its identifier" : "an operand"));
  PARITY_RETURN_IF_ERROR(c.Takes(*body, c.node().args.size() - first, Call::Field(0), "the subgraph"));
  const auto r = Returns(*body);
  if (c.Results() > 0 && c.Results() != r.size())
    return c.Bad("meta", "the op's " + std::to_string(c.Results()) + " recorded results, but the subgraph returns " + std::to_string(r.size()));
  return SameTypes(c, r, ResultsOf(c), Call::Field(0), "the subgraph");
}

// flex_attention(query, key, value, score_mod, block_mask (..., mask_mod), scale, kernel_options,
// score_mod_other_buffers, mask_mod_other_buffers).
Status CheckFlexAttention(const Call& c) {
  PARITY_RETURN_IF_ERROR(c.Arity(9, "(query, key, value, score_mod, block_mask, scale, kernel_options, score_mod_other_buffers, "
                                    "mask_mod_other_buffers)"));
  for (size_t i : {size_t{0}, size_t{1}, size_t{2}, size_t{5}, size_t{7}, size_t{8}}) PARITY_RETURN_IF_ERROR(c.Values(i, "a value"));
  PARITY_ASSIGN_OR_RETURN(const Graph* score, c.Subgraph(3, "the score function"));
  const Arg& block_mask = c.node().args[4];
  if (block_mask.kind != Arg::Kind::kList || block_mask.list.empty() || block_mask.list.back().kind != Arg::Kind::kSubgraph)
    return c.Bad(Call::Field(4), "the block mask is a tuple ending in its mask function");
  const Graph* mask = c.SubgraphNamed(block_mask.list.back().s);
  if (!mask) return c.Bad(Call::Field(4), "the mask function names subgraph \"" + block_mask.list.back().s + "\", which this graph does not hold");
  const auto count = [](const Arg& a) { return a.kind == Arg::Kind::kList ? a.list.size() : size_t{0}; };
  PARITY_RETURN_IF_ERROR(c.Takes(*score, 5 + count(c.node().args[7]), Call::Field(3), "the score function"));
  PARITY_RETURN_IF_ERROR(c.Takes(*mask, 4 + count(c.node().args[8]), Call::Field(4), "the mask function"));
  return Status::Ok();
}

using Check = Status (*)(const Call&);

// The one table: every higher-order op parity knows, by torch's name.
const std::vector<std::pair<std::string, Check>>& Table() {
  static const std::vector<std::pair<std::string, Check>> table = {
      {"cond", &CheckCond},
      {"while_loop", &CheckWhileLoop},
      {"flex_attention", &CheckFlexAttention},
      {"invoke_subgraph", [](const Call& c) { return CheckCallOf(c, 2, "(subgraph, identifier, *operands)"); }},
      {"tag_activation_checkpoint", [](const Call& c) { return CheckCallOf(c, 1, "(body, *operands)"); }},
      {"map_impl", &CheckMap},
      {"scan", &CheckScan},
      {"associative_scan", &CheckAssociativeScan},
  };
  return table;
}

Status CheckCalls(const Graph& g) {
  for (const Node* n : g.nodes()) {
    if (!n->IsHigherOrder()) continue;
    const std::string op = n->target().substr(std::string(kHopNamespace).size());
    const Check* check = nullptr;
    for (const auto& [name, fn] : Table())
      if (name == op) check = &fn;
    if (!check) {
      std::string known;
      for (const auto& [name, fn] : Table()) known += (known.empty() ? "" : ", ") + name;
      return Error::BadInput("graph \"" + g.name() + "\": node \"" + n->name() + "\": field \"target\": hop::" + op +
                             " is no higher-order op parity knows (" + known + ")");
    }
    PARITY_RETURN_IF_ERROR((*check)(Call(*n, g, op)));
  }
  for (const auto& [name, s] : g.subgraphs)
    if (Status st = CheckCalls(*s); !st.ok()) return Error::BadInput("subgraph \"" + name + "\": " + st.error().message);
  return Status::Ok();
}

}  // namespace

const std::vector<std::string>& KnownHigherOrderOps() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto& [name, fn] : Table()) v.push_back(name);
    return v;
  }();
  return names;
}

Status CheckHigherOrderCalls(const Graph& g) { return CheckCalls(g); }

}  // namespace parity::ir
