#include "interpreter/hops.h"

#include <ATen/ops/stack.h>

#include <utility>

namespace parity::interp::detail {

using ir::Arg;
using ir::Node;

namespace {

Error Bad(const std::string& where, const std::string& what) { return Error::BadInput(where + ": " + what); }

// A condition's value as a bool: a bool, a number, or a one-element tensor.
Expected<bool> Truth(const c10::IValue& v, const std::string& where) {
  if (v.isBool()) return v.toBool();
  if (v.isInt()) return v.toInt() != 0;
  if (v.isDouble()) return v.toDouble() != 0;
  if (v.isTensor() && v.toTensor().defined() && v.toTensor().numel() == 1) return v.toTensor().item<bool>();
  return Error::Runtime(where + ": the condition is a " + std::string(v.tagKind()) + ", not a bool or a one-element tensor");
}

Status CheckArity(const Program& p, size_t operands, const std::string& where, const std::string& what) {
  const size_t takes = p.graph().placeholders().size();
  if (takes != operands)
    return Bad(where, what + " @" + p.graph().name() + " takes " + std::to_string(takes) + " operands, the op gives it " +
                          std::to_string(operands));
  return Status::Ok();
}

// The number of values a list argument holds (1 for a single value).
size_t Count(const Arg& a) { return a.kind == Arg::Kind::kList ? a.list.size() : 1; }

c10::IValue AsTuple(std::vector<c10::IValue> values) { return c10::ivalue::Tuple::create(std::move(values)); }

std::vector<c10::IValue> Concat(std::vector<c10::IValue> a, const std::vector<c10::IValue>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// cond(pred, true_fn, false_fn, operands): one branch, chosen by the predicate's value.
Expected<HopKernel> CompileCond(const Node& n, const std::string& where, const Subprograms& subs) {
  if (n.args.size() != 4) return Bad(where, "cond takes (pred, true_fn, false_fn, operands)");
  PARITY_ASSIGN_OR_RETURN(const Program* yes, SubprogramOf(n.args[1], where, subs));
  PARITY_ASSIGN_OR_RETURN(const Program* no, SubprogramOf(n.args[2], where, subs));
  PARITY_RETURN_IF_ERROR(CheckArity(*yes, Count(n.args[3]), where, "the true branch"));
  PARITY_RETURN_IF_ERROR(CheckArity(*no, Count(n.args[3]), where, "the false branch"));
  const Arg pred = n.args[0], operands = n.args[3];
  return HopKernel([=](const HopEnv& env) -> Expected<c10::IValue> {
    PARITY_ASSIGN_OR_RETURN(bool taken, Truth(env.value(pred), where));
    PARITY_ASSIGN_OR_RETURN(auto out, (taken ? yes : no)->RunPositional(Items(env.value(operands)), env.attrs, env.options));
    return AsTuple(std::move(out));
  });
}

// while_loop(cond_fn, body_fn, carried_inputs, additional_inputs): the body while the condition
// holds, on the carried values (and the additional ones, unchanged).
Expected<HopKernel> CompileWhileLoop(const Node& n, const std::string& where, const Subprograms& subs) {
  if (n.args.size() != 4) return Bad(where, "while_loop takes (cond_fn, body_fn, carried_inputs, additional_inputs)");
  PARITY_ASSIGN_OR_RETURN(const Program* cond, SubprogramOf(n.args[0], where, subs));
  PARITY_ASSIGN_OR_RETURN(const Program* body, SubprogramOf(n.args[1], where, subs));
  const size_t operands = Count(n.args[2]) + Count(n.args[3]);
  PARITY_RETURN_IF_ERROR(CheckArity(*cond, operands, where, "the condition"));
  PARITY_RETURN_IF_ERROR(CheckArity(*body, operands, where, "the body"));
  const Arg carried_arg = n.args[2], extra_arg = n.args[3];
  const std::optional<int64_t> recorded = n.iterations;
  return HopKernel([=](const HopEnv& env) -> Expected<c10::IValue> {
    std::vector<c10::IValue> carried = Items(env.value(carried_arg));
    const std::vector<c10::IValue> extra = Items(env.value(extra_arg));
    const int64_t limit = WhileLimit(recorded, env.options.while_limit);
    for (int64_t it = 0;; ++it) {
      if (it >= limit)
        return Error::Runtime(where + ": while_loop did not end within " + std::to_string(limit) + " iterations (" +
                              (env.options.while_limit > 0
                                   ? std::string("--while-limit")
                                   : (recorded ? "the program ran it " + std::to_string(*recorded) + " times; the limit is " +
                                                     std::to_string(kWhileFactor) + "x that, at least " + std::to_string(kWhileFloor)
                                               : std::string("no iteration count was recorded: the ceiling")) +
                                         "; --while-limit N sets another") +
                              ")");
      PARITY_ASSIGN_OR_RETURN(auto c, cond->RunPositional(Concat(carried, extra), env.attrs, env.options));
      if (c.size() != 1) return Error::Runtime(where + ": the condition returns " + std::to_string(c.size()) + " values, not one");
      PARITY_ASSIGN_OR_RETURN(bool go, Truth(c[0], where));
      if (!go) break;
      PARITY_ASSIGN_OR_RETURN(auto next, body->RunPositional(Concat(carried, extra), env.attrs, env.options));
      if (next.size() != carried.size())
        return Error::Runtime(where + ": the body returns " + std::to_string(next.size()) + " values for " +
                              std::to_string(carried.size()) + " carried ones");
      carried = std::move(next);
    }
    return AsTuple(std::move(carried));
  });
}

// A call of a subgraph on the operands from argument `first` on: invoke_subgraph(subgraph,
// identifier, *operands) and tag_activation_checkpoint(body, *operands) (which values are saved
// for the backward is the compiler's business; the values are the body's).
Expected<HopKernel> CompileCall(const Node& n, const std::string& where, const Subprograms& subs, size_t first) {
  if (n.args.size() < first) return Bad(where, "takes a subgraph and its operands");
  PARITY_ASSIGN_OR_RETURN(const Program* body, SubprogramOf(n.args[0], where, subs));
  std::vector<Arg> operands(n.args.begin() + static_cast<std::ptrdiff_t>(first), n.args.end());
  PARITY_RETURN_IF_ERROR(CheckArity(*body, operands.size(), where, "the subgraph"));
  return HopKernel([=](const HopEnv& env) -> Expected<c10::IValue> {
    std::vector<c10::IValue> values;
    for (const auto& a : operands) values.push_back(env.value(a));
    PARITY_ASSIGN_OR_RETURN(auto out, body->RunPositional(values, env.attrs, env.options));
    return AsTuple(std::move(out));
  });
}

// map_impl(f, xs, pos_args): f on the slices of xs along dim 0, each output stacked.
Expected<HopKernel> CompileMap(const Node& n, const std::string& where, const Subprograms& subs) {
  if (n.args.size() != 3) return Bad(where, "map_impl takes (f, xs, pos_args)");
  PARITY_ASSIGN_OR_RETURN(const Program* f, SubprogramOf(n.args[0], where, subs));
  PARITY_RETURN_IF_ERROR(CheckArity(*f, Count(n.args[1]) + Count(n.args[2]), where, "the mapped function"));
  const Arg xs_arg = n.args[1], pos_arg = n.args[2];
  return HopKernel([=](const HopEnv& env) -> Expected<c10::IValue> {
    const std::vector<c10::IValue> xs = Items(env.value(xs_arg)), pos = Items(env.value(pos_arg));
    if (xs.empty() || !xs[0].isTensor()) return Error::Runtime(where + ": map_impl maps over no tensor");
    const int64_t count = xs[0].toTensor().size(0);
    std::vector<std::vector<at::Tensor>> per_output;
    for (int64_t i = 0; i < count; ++i) {
      std::vector<c10::IValue> args;
      for (const auto& x : xs) args.push_back(x.toTensor().select(0, i));
      PARITY_ASSIGN_OR_RETURN(auto out, f->RunPositional(Concat(std::move(args), pos), env.attrs, env.options));
      per_output.resize(out.size());
      for (size_t k = 0; k < out.size(); ++k) per_output[k].push_back(out[k].toTensor());
    }
    std::vector<c10::IValue> stacked;
    for (auto& outs : per_output) stacked.emplace_back(at::stack(outs));
    return AsTuple(std::move(stacked));
  });
}

// scan(combine_fn, init, xs, additional_inputs): the carry through combine_fn over the slices of
// xs along dim 0; returns the last carry and each step's other outputs stacked.
Expected<HopKernel> CompileScan(const Node& n, const std::string& where, const Subprograms& subs) {
  if (n.args.size() != 4) return Bad(where, "scan takes (combine_fn, init, xs, additional_inputs)");
  PARITY_ASSIGN_OR_RETURN(const Program* f, SubprogramOf(n.args[0], where, subs));
  PARITY_RETURN_IF_ERROR(CheckArity(*f, Count(n.args[1]) + Count(n.args[2]) + Count(n.args[3]), where, "the combine function"));
  const Arg init_arg = n.args[1], xs_arg = n.args[2], extra_arg = n.args[3];
  return HopKernel([=](const HopEnv& env) -> Expected<c10::IValue> {
    std::vector<c10::IValue> carry = Items(env.value(init_arg));
    const std::vector<c10::IValue> xs = Items(env.value(xs_arg)), extra = Items(env.value(extra_arg));
    const int64_t count = xs.empty() || !xs[0].isTensor() ? 0 : xs[0].toTensor().size(0);
    std::vector<std::vector<at::Tensor>> ys;
    for (int64_t i = 0; i < count; ++i) {
      std::vector<c10::IValue> slices;
      for (const auto& x : xs) slices.push_back(x.toTensor().select(0, i));
      PARITY_ASSIGN_OR_RETURN(auto out, f->RunPositional(Concat(Concat(carry, slices), extra), env.attrs, env.options));
      if (out.size() < carry.size())
        return Error::Runtime(where + ": the combine function returns fewer values than the carry holds");
      ys.resize(out.size() - carry.size());
      for (size_t k = carry.size(); k < out.size(); ++k) ys[k - carry.size()].push_back(out[k].toTensor());
      out.resize(carry.size());
      carry = std::move(out);
    }
    for (auto& y : ys) carry.emplace_back(at::stack(y));
    return AsTuple(std::move(carry));
  });
}

// associative_scan(combine_fn, xs, additional_inputs): the inclusive scan of every leaf of xs
// along dim 0 by combine_fn(*running, *next slice, *additional), which torch requires to be
// associative: parity combines left to right, one slice at a time (the shapes the combine
// function was traced at), which gives what torch's tree of combinations gives up to rounding.
// Returns each leaf's running values stacked.
Expected<HopKernel> CompileAssociativeScan(const Node& n, const std::string& where, const Subprograms& subs) {
  if (n.args.size() != 3) return Bad(where, "associative_scan takes (combine_fn, xs, additional_inputs)");
  PARITY_ASSIGN_OR_RETURN(const Program* f, SubprogramOf(n.args[0], where, subs));
  PARITY_RETURN_IF_ERROR(CheckArity(*f, 2 * Count(n.args[1]) + Count(n.args[2]), where, "the combine function"));
  const Arg xs_arg = n.args[1], extra_arg = n.args[2];
  return HopKernel([=](const HopEnv& env) -> Expected<c10::IValue> {
    const std::vector<c10::IValue> xs = Items(env.value(xs_arg)), extra = Items(env.value(extra_arg));
    for (const auto& x : xs)
      if (!x.isTensor() || x.toTensor().dim() == 0) return Error::Runtime(where + ": associative_scan scans a value that is no tensor of dim >= 1");
    const int64_t count = xs.empty() ? 0 : xs[0].toTensor().size(0);
    if (count == 0) return AsTuple(xs);
    std::vector<std::vector<at::Tensor>> ys(xs.size());
    std::vector<c10::IValue> running;
    for (int64_t i = 0; i < count; ++i) {
      std::vector<c10::IValue> slices;
      for (const auto& x : xs) slices.push_back(x.toTensor().select(0, i));
      if (i == 0) {
        running = std::move(slices);
      } else {
        PARITY_ASSIGN_OR_RETURN(running, f->RunPositional(Concat(Concat(running, slices), extra), env.attrs, env.options));
        if (running.size() != xs.size())
          return Error::Runtime(where + ": the combine function returns " + std::to_string(running.size()) + " values for " +
                                std::to_string(xs.size()) + " scanned ones");
      }
      for (size_t k = 0; k < xs.size(); ++k) ys[k].push_back(running[k].toTensor());
    }
    std::vector<c10::IValue> stacked;
    for (auto& y : ys) stacked.emplace_back(at::stack(y));
    return AsTuple(std::move(stacked));
  });
}

using Compiler = Expected<HopKernel> (*)(const Node&, const std::string&, const Subprograms&);

// The one table of the higher-order ops parity runs (torch.ops.higher_order.<name>).
const std::map<std::string, Compiler>& Table() {
  static const std::map<std::string, Compiler> table = {
      {"cond", &CompileCond},
      {"while_loop", &CompileWhileLoop},
      {"flex_attention", &CompileFlexAttention},
      {"invoke_subgraph", [](const Node& n, const std::string& w, const Subprograms& s) { return CompileCall(n, w, s, 2); }},
      {"tag_activation_checkpoint", [](const Node& n, const std::string& w, const Subprograms& s) { return CompileCall(n, w, s, 1); }},
      {"map_impl", &CompileMap},
      {"scan", &CompileScan},
      {"associative_scan", &CompileAssociativeScan},
  };
  return table;
}

}  // namespace

Expected<const Program*> SubprogramOf(const Arg& a, const std::string& where, const Subprograms& subprograms) {
  if (a.kind != Arg::Kind::kSubgraph) return Bad(where, "expected a subgraph argument");
  auto it = subprograms.find(a.s);
  if (it == subprograms.end()) return Bad(where, "no subgraph @" + a.s);
  return &it->second;
}

std::vector<c10::IValue> Items(const c10::IValue& v) {
  if (v.isList()) {
    auto l = v.toListRef();
    return std::vector<c10::IValue>(l.begin(), l.end());
  }
  if (v.isTuple()) {
    const auto& el = v.toTupleRef().elements();
    return std::vector<c10::IValue>(el.begin(), el.end());
  }
  return {v};
}

std::vector<std::string> RunnableHigherOrderOps() {
  std::vector<std::string> names;
  for (const auto& [name, compile] : Table()) names.push_back(name);
  return names;
}

Expected<HopKernel> CompileHop(const Node& n, const std::string& where, const Subprograms& subprograms) {
  const std::string name = n.target().substr(std::string(ir::kHopNamespace).size());
  auto it = Table().find(name);
  if (it == Table().end()) {
    std::string known;
    for (const auto& [k, v] : Table()) known += (known.empty() ? "" : ", ") + k;
    return Error::Unsupported(where + ": the higher-order op " + name + " is not one parity runs (it runs " + known + ")");
  }
  return it->second(n, where, subprograms);
}

}  // namespace parity::interp::detail

namespace parity::interp {

int64_t WhileLimit(std::optional<int64_t> recorded, int64_t override_limit) {
  if (override_limit > 0) return override_limit;
  if (!recorded) return kWhileCeiling;
  const int64_t scaled = *recorded > kWhileCeiling / kWhileFactor ? kWhileCeiling : kWhileFactor * *recorded;
  return std::min(kWhileCeiling, std::max(kWhileFloor, scaled));
}

}  // namespace parity::interp
