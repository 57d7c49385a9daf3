#include "interpreter/sym_ops.h"

#include <algorithm>
#include <cmath>

#include "interpreter/interpreter.h"
#include "repro/graph.h"

namespace parity::interp {
namespace detail {

const std::set<std::string>& SymOps() {
  // tools/parity_capture/standalone_graph.py SYM_FUNCTIONS names the same operations.
  static const std::set<std::string> ops = {
      "add",  "sub",  "mul",  "floordiv", "truediv", "mod",   "pow",     "neg",     "pos",  "abs",  "eq",   "ne",    "lt",
      "le",   "gt",   "ge",   "and",      "or",      "xor",   "lshift",  "rshift",  "not",  "max",  "min",  "float", "int",
      "ceil", "floor", "round", "sym_ite", "sym_not", "sym_sum", "sqrt",   "cos",     "cosh", "sin",  "sinh", "tan",   "tanh",
      "asin", "acos", "atan",  "log2"};
  return ops;
}

std::string SymOpList() {
  std::string out;
  for (const auto& op : SymOps()) out += (out.empty() ? "" : ", ") + op;
  return out;
}

namespace {

// A float made an integer (int(), ceil, floor, round): past int64 the cast is undefined, so it is
// an error naming the node.
Expected<c10::IValue> IntOf(double x, const std::string& where, const std::string& target) {
  if (!(std::fabs(x) < 9.2e18)) return Error::Runtime(where + ": " + target + " of " + std::to_string(x) + " is outside int64");
  return c10::IValue(static_cast<int64_t>(x));
}

double Num(const c10::IValue& x) { return x.isDouble() ? x.toDouble() : x.isBool() ? (x.toBool() ? 1.0 : 0.0) : static_cast<double>(x.toInt()); }
bool Integral(const c10::IValue& x) { return x.isInt() || x.isBool(); }
int64_t AsInt(const c10::IValue& x) { return x.isBool() ? static_cast<int64_t>(x.toBool()) : x.toInt(); }

// math.<name> of a size (torch._sym_<name>): a float.
double MathFn(const std::string& op, double x) {
  if (op == "sqrt") return std::sqrt(x);
  if (op == "cos") return std::cos(x);
  if (op == "cosh") return std::cosh(x);
  if (op == "sin") return std::sin(x);
  if (op == "sinh") return std::sinh(x);
  if (op == "tan") return std::tan(x);
  if (op == "tanh") return std::tanh(x);
  if (op == "asin") return std::asin(x);
  if (op == "acos") return std::acos(x);
  if (op == "atan") return std::atan(x);
  return std::log2(x);
}

// Python's round(x[, ndigits]): halves to even; round(x) of a number is an int, round(x, n) keeps
// the type of x.
Expected<c10::IValue> Round(const std::vector<c10::IValue>& v, const std::string& where) {
  if (v.size() == 1) {
    if (Integral(v[0])) return c10::IValue(AsInt(v[0]));
    return IntOf(std::nearbyint(Num(v[0])), where, "round");
  }
  const double digits = Num(v[1]);
  if (Integral(v[0])) {
    if (digits >= 0) return c10::IValue(AsInt(v[0]));
    const double scale = std::pow(10.0, -digits);
    return IntOf(std::nearbyint(Num(v[0]) / scale) * scale, where, "round");
  }
  const double scale = std::pow(10.0, static_cast<double>(digits));
  return c10::IValue(std::nearbyint(Num(v[0]) * scale) / scale);
}

// & | ^ as Python computes them: on two bools a bool, on integers their bits, on floats (only a
// SymBool's logic reaches here as 0/1) the truth of both.
c10::IValue Bitwise(const std::string& op, const c10::IValue& x, const c10::IValue& y) {
  if (x.isBool() && y.isBool()) {
    const bool a = x.toBool(), b = y.toBool();
    return c10::IValue(op == "and" ? (a && b) : op == "or" ? (a || b) : (a != b));
  }
  if (Integral(x) && Integral(y)) {
    const int64_t a = AsInt(x), b = AsInt(y);
    return c10::IValue(op == "and" ? (a & b) : op == "or" ? (a | b) : (a ^ b));
  }
  const bool a = Num(x) != 0, b = Num(y) != 0;
  return c10::IValue(op == "and" ? (a && b) : op == "or" ? (a || b) : (a != b));
}

}  // namespace

namespace {

const std::set<std::string>& UnaryOps() {
  static const std::set<std::string> ops = {"neg", "pos",  "abs", "not", "sym_not", "float", "int",  "ceil", "floor", "sqrt",
                                            "cos", "cosh", "sin", "sinh", "tan",   "tanh",  "asin", "acos", "atan",  "log2"};
  return ops;
}

// One operand: negation, truth, conversions, math functions.
Expected<c10::IValue> EvalUnary(const std::string& op, const c10::IValue& x, const std::string& where, const std::string& target) {
  if (op == "not" || op == "sym_not") return c10::IValue(Num(x) == 0);
  if (op == "float") return c10::IValue(Num(x));
  if (op == "int") return IntOf(std::trunc(Num(x)), where, target);
  if (op == "ceil") return IntOf(std::ceil(Num(x)), where, target);
  if (op == "floor") return IntOf(std::floor(Num(x)), where, target);
  if (op != "neg" && op != "pos" && op != "abs") return c10::IValue(MathFn(op, Num(x)));
  if (Integral(x)) {
    const int64_t i = AsInt(x);
    return c10::IValue(op == "neg" ? -i : op == "abs" ? (i < 0 ? -i : i) : i);
  }
  const double d = Num(x);
  return c10::IValue(op == "neg" ? -d : op == "abs" ? std::fabs(d) : d);
}

// n << k, n >> k of integers (Python's: >> floors, no count below 0); past int64 an error.
Expected<c10::IValue> Shift(const std::string& op, const c10::IValue& x, const c10::IValue& y, const std::string& where,
                            const std::string& target) {
  if (!Integral(x) || !Integral(y)) return Error::Runtime(where + ": " + target + " of a float");
  const int64_t i = AsInt(x), j = AsInt(y);
  if (j < 0) return Error::Runtime(where + ": " + target + " by a negative count");
  if (op == "rshift") return c10::IValue(j >= 63 ? (i < 0 ? int64_t{-1} : int64_t{0}) : (i >> j));
  if (j >= 63 || (i != 0 && std::fabs(static_cast<double>(i)) * std::pow(2.0, static_cast<double>(j)) >= 9.2e18))
    return Error::Runtime(where + ": " + target + " overflows int64");
  return c10::IValue(static_cast<int64_t>(static_cast<uint64_t>(i) << j));
}

// Two operands: comparisons, & | ^, shifts, arithmetic (int op int stays int).
Expected<c10::IValue> EvalBinary(const std::string& op, const c10::IValue& x, const c10::IValue& y, const std::string& where,
                                 const std::string& target) {
  const double a = Num(x), b = Num(y);
  if (op == "eq") return c10::IValue(a == b);
  if (op == "ne") return c10::IValue(a != b);
  if (op == "lt") return c10::IValue(a < b);
  if (op == "le") return c10::IValue(a <= b);
  if (op == "gt") return c10::IValue(a > b);
  if (op == "ge") return c10::IValue(a >= b);
  if (op == "and" || op == "or" || op == "xor") return Bitwise(op, x, y);
  if (op == "lshift" || op == "rshift") return Shift(op, x, y, where, target);
  if ((op == "floordiv" || op == "mod" || op == "truediv") && b == 0) return Error::Runtime(where + ": " + target + " by zero");
  if (op == "truediv") return c10::IValue(a / b);
  if (Integral(x) && Integral(y)) {
    const int64_t i = AsInt(x), j = AsInt(y);
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

// torch.sym_sum(list): its list arrives flattened.
c10::IValue Sum(const std::vector<c10::IValue>& v) {
  if (std::all_of(v.begin(), v.end(), Integral)) {
    int64_t sum = 0;
    for (const auto& x : v) sum += AsInt(x);
    return c10::IValue(sum);
  }
  double sum = 0;
  for (const auto& x : v) sum += Num(x);
  return c10::IValue(sum);
}

}  // namespace

Expected<c10::IValue> EvalSym(const std::string& target, const std::vector<c10::IValue>& v, const std::string& where) {
  const std::string op = target.substr(std::string(ir::kSymNamespace).size());
  for (const auto& x : v)
    if (!x.isInt() && !x.isDouble() && !x.isBool())
      return Error::Runtime(where + ": " + target + " of a " + x.tagKind() + " (sizes, numbers and booleans only)");
  auto need = [&](size_t k) -> Status {
    if (v.size() != k) return Error::BadInput(where + ": " + target + " takes " + std::to_string(k) + " argument(s)");
    return Status::Ok();
  };
  if (UnaryOps().count(op)) {
    PARITY_RETURN_IF_ERROR(need(1));
    return EvalUnary(op, v[0], where, target);
  }
  if (op == "sym_ite") {
    PARITY_RETURN_IF_ERROR(need(3));
    return Num(v[0]) != 0 ? v[1] : v[2];
  }
  if (op == "round") {
    if (v.size() != 1 && v.size() != 2) return Error::BadInput(where + ": " + target + " takes 1 or 2 arguments");
    return Round(v, where);
  }
  if (op == "sym_sum") return Sum(v);
  if ((op == "max" || op == "min") && !v.empty()) {
    c10::IValue best = v[0];
    for (const auto& x : v)
      if (op == "max" ? Num(x) > Num(best) : Num(x) < Num(best)) best = x;
    return best;
  }
  PARITY_RETURN_IF_ERROR(need(2));
  return EvalBinary(op, v[0], v[1], where, target);
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
