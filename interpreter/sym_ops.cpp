#include "interpreter/sym_ops.h"

#include <algorithm>
#include <cmath>

#include "interpreter/interpreter.h"
#include "repro/graph.h"

namespace parity::interp {
namespace detail {

const std::set<std::string>& SymOps() {
  static const std::set<std::string> ops = {"add", "sub", "mul", "floordiv", "truediv", "mod", "pow", "neg", "pos",
                                            "abs", "eq",  "ne",  "lt",  "le",       "gt",      "ge",  "and", "or",
                                            "not", "max", "min", "float", "int",    "ceil",    "floor", "sym_ite"};
  return ops;
}

Expected<c10::IValue> EvalSym(const std::string& target, const std::vector<c10::IValue>& v, const std::string& where) {
  const std::string op = target.substr(std::string(ir::kSymNamespace).size());
  auto num = [](const c10::IValue& x) { return x.isDouble() ? x.toDouble() : x.isBool() ? (x.toBool() ? 1.0 : 0.0) : static_cast<double>(x.toInt()); };
  auto integral = [](const c10::IValue& x) { return x.isInt() || x.isBool(); };
  auto as_int = [](const c10::IValue& x) { return x.isBool() ? static_cast<int64_t>(x.toBool()) : x.toInt(); };
  for (const auto& x : v)
    if (!x.isInt() && !x.isDouble() && !x.isBool())
      return Error::Runtime(where + ": " + target + " of a " + x.tagKind() + " (sizes, numbers and booleans only)");
  const size_t arity = v.size();
  auto need = [&](size_t k) -> Status {
    if (arity != k) return Error::BadInput(where + ": " + target + " takes " + std::to_string(k) + " argument(s)");
    return Status::Ok();
  };
  if (op == "neg" || op == "pos" || op == "abs" || op == "not" || op == "float" || op == "int" || op == "ceil" || op == "floor") {
    PARITY_RETURN_IF_ERROR(need(1));
    const c10::IValue& x = v[0];
    if (op == "not") return c10::IValue(num(x) == 0);
    if (op == "float") return c10::IValue(num(x));
    if (op == "int") return c10::IValue(static_cast<int64_t>(std::trunc(num(x))));
    if (op == "ceil") return c10::IValue(static_cast<int64_t>(std::ceil(num(x))));
    if (op == "floor") return c10::IValue(static_cast<int64_t>(std::floor(num(x))));
    if (integral(x)) {
      const int64_t i = as_int(x);
      return c10::IValue(op == "neg" ? -i : op == "abs" ? (i < 0 ? -i : i) : i);
    }
    const double d = num(x);
    return c10::IValue(op == "neg" ? -d : op == "abs" ? std::fabs(d) : d);
  }
  if (op == "sym_ite") {
    PARITY_RETURN_IF_ERROR(need(3));
    return num(v[0]) != 0 ? v[1] : v[2];
  }
  if ((op == "max" || op == "min") && arity >= 1) {
    c10::IValue best = v[0];
    for (const auto& x : v)
      if (op == "max" ? num(x) > num(best) : num(x) < num(best)) best = x;
    return best;
  }
  PARITY_RETURN_IF_ERROR(need(2));
  const c10::IValue &x = v[0], &y = v[1];
  const double a = num(x), b = num(y);
  if (op == "eq") return c10::IValue(a == b);
  if (op == "ne") return c10::IValue(a != b);
  if (op == "lt") return c10::IValue(a < b);
  if (op == "le") return c10::IValue(a <= b);
  if (op == "gt") return c10::IValue(a > b);
  if (op == "ge") return c10::IValue(a >= b);
  if (op == "and") return c10::IValue(a != 0 && b != 0);
  if (op == "or") return c10::IValue(a != 0 || b != 0);
  if ((op == "floordiv" || op == "mod" || op == "truediv") && b == 0) return Error::Runtime(where + ": " + target + " by zero");
  if (op == "truediv") return c10::IValue(a / b);
  const bool ints = integral(x) && integral(y);
  if (ints) {
    const int64_t i = as_int(x), j = as_int(y);
    if (op == "add") return c10::IValue(i + j);
    if (op == "sub") return c10::IValue(i - j);
    if (op == "mul") return c10::IValue(i * j);
    if (op == "floordiv") return c10::IValue(static_cast<int64_t>(std::floor(static_cast<double>(i) / static_cast<double>(j))));
    if (op == "mod") return c10::IValue(i - j * static_cast<int64_t>(std::floor(static_cast<double>(i) / static_cast<double>(j))));
    if (op == "pow" && j >= 0) return c10::IValue(static_cast<int64_t>(std::llround(std::pow(static_cast<double>(i), static_cast<double>(j)))));
  }
  if (op == "add") return c10::IValue(a + b);
  if (op == "sub") return c10::IValue(a - b);
  if (op == "mul") return c10::IValue(a * b);
  if (op == "floordiv") return c10::IValue(std::floor(a / b));
  if (op == "mod") return c10::IValue(a - b * std::floor(a / b));
  if (op == "pow") return c10::IValue(std::pow(a, b));
  return Error::BadInput(where + ": unknown size operation " + target);
}

}  // namespace detail

Expected<sym::Bindings> BindSymbols(const ir::Graph& g, const TensorMap& inputs) {
  sym::Bindings b;
  const std::string gw = "graph \"" + g.name() + "\"";
  for (const ir::Node* n : g.placeholders()) {
    if (!n->sym.empty() || n->meta.empty() || !n->meta[0] || n->meta[0]->sym_shape.empty()) continue;
    auto it = inputs.find(n->name());
    if (it == inputs.end()) continue;  // Run names the missing input
    const ir::TensorMeta& m = *n->meta[0];
    if (static_cast<size_t>(it->second.dim()) != m.sym_shape.size())
      return Error::BadInput(gw + ": input \"" + n->name() + "\" has " + std::to_string(it->second.dim()) + " dims, its meta " +
                             std::to_string(m.sym_shape.size()));
    for (size_t d = 0; d < m.sym_shape.size(); ++d) {
      const std::string& name = m.sym_shape[d];
      if (name.empty() || !g.symbols.count(name)) continue;  // a static dim, or an expression: bound by its symbols
      const int64_t size = it->second.size(static_cast<int64_t>(d));
      auto [pos, fresh] = b.emplace(name, size);
      if (!fresh && pos->second != size)
        return Error::BadInput(gw + ": symbol " + name + " is " + std::to_string(pos->second) + " by one input and " +
                               std::to_string(size) + " by input \"" + n->name() + "\" dim " + std::to_string(d));
    }
  }
  for (const auto& [name, s] : g.symbols) {
    // Bound by no tensor input (a number the program passed): as recorded. An unbacked symbol's
    // value comes from the node that makes it as the graph runs (checked by the graph's asserts).
    b.emplace(name, s.hint);
    if (s.unbacked) continue;
    const int64_t v = b[name];
    if (v < s.min || (s.max && v > *s.max))
      return Error::BadInput(gw + ": symbol " + name + " = " + std::to_string(v) + " is outside its range [" + std::to_string(s.min) +
                             ", " + (s.max ? std::to_string(*s.max) : "inf") + "] (the range the graph was compiled for)");
  }
  for (const auto& guard : g.guards) {
    PARITY_ASSIGN_OR_RETURN(sym::Expr e, sym::Expr::Parse(guard, gw + ": guard"));
    const auto read = e.Symbols();
    if (std::any_of(read.begin(), read.end(), [&g](const std::string& s) { return g.symbols.at(s).unbacked; })) continue;
    PARITY_ASSIGN_OR_RETURN(double ok, e.Eval(b));
    if (ok == 0) {
      std::string values;
      for (const auto& name : e.Symbols()) values += (values.empty() ? "" : ", ") + name + " = " + std::to_string(b[name]);
      return Error::BadInput(gw + ": guard " + guard + " does not hold for " + values + " (the graph was compiled assuming it)");
    }
  }
  return b;
}

}  // namespace parity::interp
