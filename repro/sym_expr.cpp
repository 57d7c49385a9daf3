#include "repro/sym_expr.h"

#include <cctype>
#include <cmath>
#include <algorithm>
#include <climits>
#include <cstdint>
#include <functional>

namespace parity::sym {

struct Expr::Node {
  enum class Kind { kNumber, kSymbol, kUnary, kBinary, kCall } kind = Kind::kNumber;
  double number = 0;
  std::string name;  // symbol, operator ("+", "<=", ...) or function
  std::vector<std::shared_ptr<const Node>> args;
  int depth = 1;  // of the tree below and including this node (evaluation recurses this deep)
};

std::string Quoted(const std::string& text) {
  constexpr size_t kShown = 80;
  if (text.size() <= kShown) return "\"" + text + "\"";
  return "\"" + text.substr(0, kShown) + "...\" (" + std::to_string(text.size()) + " characters)";
}

namespace {

using NodeP = std::shared_ptr<const Expr::Node>;
using Kind = Expr::Node::Kind;

// The functions of torch's size expressions (torch/utils/_sympy/functions.py, and sympy's own
// that its printing leaves: floor, ceiling, Abs, Max, Min), one line each: name, arity, value.
// Integer-valued ones compute on the doubles' integer values, as the ShapeEnv does on ints.
struct Function {
  size_t min_args, max_args;
  Expected<double> (*value)(const std::vector<double>& v);  // BadValue's text is added by the caller
  bool even_args = false;                                    // sizes then strides
  std::string Arity() const {
    if (min_args == max_args) return std::to_string(min_args);
    return max_args == SIZE_MAX ? std::to_string(min_args) + " or more" : std::to_string(min_args) + "-" + std::to_string(max_args);
  }
};

Expected<double> DivisionByZero() { return Error::BadInput("division by zero"); }
double FloorDivOf(double a, double b) { return std::floor(a / b); }
double PyMod(double a, double b) { return a - b * std::floor(a / b); }
double Bool(bool b) { return b ? 1.0 : 0.0; }
// Python's round(): halves to even (the default rounding mode), as RoundToInt and round(x, n) do.
double RoundHalfEven(double x) { return std::nearbyint(x); }
// An integer operand of a bitwise function: a literal in the text can be any double, and a cast
// of one past int64 is undefined.
bool FitsInt64(double x) { return std::fabs(x) < 9.2e18; }
int64_t AsInt(double x) { return static_cast<int64_t>(x); }
template <typename F>
Expected<double> Bits(const std::vector<double>& v, F f) {
  if (!FitsInt64(v[0]) || !FitsInt64(v[1])) return Error::BadInput("operand outside int64");
  return static_cast<double>(f(AsInt(v[0]), AsInt(v[1])));
}

// torch's is_non_overlapping_and_dense over sizes then strides (c10's
// _compute_non_overlapping_and_dense): dims of size < 2 last, the rest by stride, each stride the
// product of the sizes before it.
Expected<double> NonOverlappingAndDense(const std::vector<double>& v) {
  const size_t n = v.size() / 2;
  if (n == 1) return Bool(v[0] < 2 || v[1] == 1);
  std::vector<size_t> perm(n);
  for (size_t i = 0; i < n; ++i) perm[i] = i;
  std::stable_sort(perm.begin(), perm.end(), [&](size_t a, size_t b) {
    if (v[a] < 2) return false;
    if (v[b] < 2) return true;
    return v[n + a] < v[n + b];
  });
  double stride = 1;
  for (size_t i : perm) {
    if (v[i] < 2) return 1.0;
    if (v[n + i] != stride) return 0.0;
    stride *= v[i];
  }
  return 1.0;
}

const std::map<std::string, Function>& Functions() {
  using V = const std::vector<double>&;
  static const std::map<std::string, Function> table = {
      // comparisons and logic (booleans are 0/1)
      {"Eq", {2, 2, [](V v) -> Expected<double> { return Bool(v[0] == v[1]); }}},
      {"Ne", {2, 2, [](V v) -> Expected<double> { return Bool(v[0] != v[1]); }}},
      {"Lt", {2, 2, [](V v) -> Expected<double> { return Bool(v[0] < v[1]); }}},
      {"Le", {2, 2, [](V v) -> Expected<double> { return Bool(v[0] <= v[1]); }}},
      {"Gt", {2, 2, [](V v) -> Expected<double> { return Bool(v[0] > v[1]); }}},
      {"Ge", {2, 2, [](V v) -> Expected<double> { return Bool(v[0] >= v[1]); }}},
      {"And", {0, SIZE_MAX, [](V v) -> Expected<double> { return Bool(std::all_of(v.begin(), v.end(), [](double x) { return x != 0; })); }}},
      {"Or", {0, SIZE_MAX, [](V v) -> Expected<double> { return Bool(std::any_of(v.begin(), v.end(), [](double x) { return x != 0; })); }}},
      {"Not", {1, 1, [](V v) -> Expected<double> { return Bool(v[0] == 0); }}},
      {"Where", {3, 3, [](V v) -> Expected<double> { return v[0] != 0 ? v[1] : v[2]; }}},
      // integer arithmetic
      {"Mod", {2, 2, [](V v) -> Expected<double> { return v[1] == 0 ? DivisionByZero() : Expected<double>(PyMod(v[0], v[1])); }}},
      {"PythonMod", {2, 2, [](V v) -> Expected<double> { return v[1] == 0 ? DivisionByZero() : Expected<double>(PyMod(v[0], v[1])); }}},
      {"FloorDiv", {2, 2, [](V v) -> Expected<double> { return v[1] == 0 ? DivisionByZero() : Expected<double>(FloorDivOf(v[0], v[1])); }}},
      {"CleanDiv", {2, 2, [](V v) -> Expected<double> { return v[1] == 0 ? DivisionByZero() : Expected<double>(FloorDivOf(v[0], v[1])); }}},
      {"CeilDiv", {2, 2, [](V v) -> Expected<double> { return v[1] == 0 ? DivisionByZero() : Expected<double>(std::ceil(v[0] / v[1])); }}},
      {"ModularIndexing", {3, 3, [](V v) -> Expected<double> {
         if (v[1] == 0 || v[2] == 0) return DivisionByZero();
         return PyMod(FloorDivOf(v[0], v[1]), v[2]);
       }}},
      {"PowByNatural", {2, 2, [](V v) -> Expected<double> { return std::pow(v[0], v[1]); }}},
      {"LShift", {2, 2, [](V v) -> Expected<double> { return v[0] * std::pow(2.0, v[1]); }}},
      {"RShift", {2, 2, [](V v) -> Expected<double> { return std::floor(v[0] / std::pow(2.0, v[1])); }}},
      {"BitwiseFn_bitwise_and", {2, 2, [](V v) { return Bits(v, [](int64_t a, int64_t b) { return a & b; }); }}},
      {"BitwiseFn_bitwise_or", {2, 2, [](V v) { return Bits(v, [](int64_t a, int64_t b) { return a | b; }); }}},
      {"BitwiseFn_bitwise_xor", {2, 2, [](V v) { return Bits(v, [](int64_t a, int64_t b) { return a ^ b; }); }}},
      {"Max", {1, SIZE_MAX, [](V v) -> Expected<double> { return *std::max_element(v.begin(), v.end()); }}},
      {"Min", {1, SIZE_MAX, [](V v) -> Expected<double> { return *std::min_element(v.begin(), v.end()); }}},
      {"Abs", {1, 1, [](V v) -> Expected<double> { return std::fabs(v[0]); }}},
      {"Identity", {1, 1, [](V v) -> Expected<double> { return v[0]; }}},
      {"IsNonOverlappingAndDenseIndicator", {2, SIZE_MAX, NonOverlappingAndDense, true}},
      // between integers and floats
      {"floor", {1, 1, [](V v) -> Expected<double> { return std::floor(v[0]); }}},
      {"ceiling", {1, 1, [](V v) -> Expected<double> { return std::ceil(v[0]); }}},
      {"FloorToInt", {1, 1, [](V v) -> Expected<double> { return std::floor(v[0]); }}},
      {"CeilToInt", {1, 1, [](V v) -> Expected<double> { return std::ceil(v[0]); }}},
      {"TruncToInt", {1, 1, [](V v) -> Expected<double> { return std::trunc(v[0]); }}},
      {"TruncToFloat", {1, 1, [](V v) -> Expected<double> { return std::trunc(v[0]); }}},
      {"RoundToInt", {1, 1, [](V v) -> Expected<double> { return RoundHalfEven(v[0]); }}},
      {"RoundDecimal", {2, 2, [](V v) -> Expected<double> {
         const double scale = std::pow(10.0, v[1]);
         return RoundHalfEven(v[0] * scale) / scale;
       }}},
      {"ToFloat", {1, 1, [](V v) -> Expected<double> { return v[0]; }}},
      {"IntTrueDiv", {2, 2, [](V v) -> Expected<double> { return v[1] == 0 ? DivisionByZero() : Expected<double>(v[0] / v[1]); }}},
      {"FloatTrueDiv", {2, 2, [](V v) -> Expected<double> { return v[1] == 0 ? DivisionByZero() : Expected<double>(v[0] / v[1]); }}},
      {"FloatPow", {2, 2, [](V v) -> Expected<double> { return std::pow(v[0], v[1]); }}},
      // math on sizes (torch.sym_sqrt, math.cos of a size, ...): OpaqueUnaryFn_<name>
      {"OpaqueUnaryFn_sqrt", {1, 1, [](V v) -> Expected<double> { return std::sqrt(v[0]); }}},
      {"OpaqueUnaryFn_cos", {1, 1, [](V v) -> Expected<double> { return std::cos(v[0]); }}},
      {"OpaqueUnaryFn_cosh", {1, 1, [](V v) -> Expected<double> { return std::cosh(v[0]); }}},
      {"OpaqueUnaryFn_sin", {1, 1, [](V v) -> Expected<double> { return std::sin(v[0]); }}},
      {"OpaqueUnaryFn_sinh", {1, 1, [](V v) -> Expected<double> { return std::sinh(v[0]); }}},
      {"OpaqueUnaryFn_tan", {1, 1, [](V v) -> Expected<double> { return std::tan(v[0]); }}},
      {"OpaqueUnaryFn_tanh", {1, 1, [](V v) -> Expected<double> { return std::tanh(v[0]); }}},
      {"OpaqueUnaryFn_asin", {1, 1, [](V v) -> Expected<double> { return std::asin(v[0]); }}},
      {"OpaqueUnaryFn_acos", {1, 1, [](V v) -> Expected<double> { return std::acos(v[0]); }}},
      {"OpaqueUnaryFn_atan", {1, 1, [](V v) -> Expected<double> { return std::atan(v[0]); }}},
      {"OpaqueUnaryFn_exp", {1, 1, [](V v) -> Expected<double> { return std::exp(v[0]); }}},
      {"OpaqueUnaryFn_log", {1, 1, [](V v) -> Expected<double> { return std::log(v[0]); }}},
      {"OpaqueUnaryFn_asinh", {1, 1, [](V v) -> Expected<double> { return std::asinh(v[0]); }}},
      {"OpaqueUnaryFn_log2", {1, 1, [](V v) -> Expected<double> { return std::log2(v[0]); }}},
  };
  return table;
}

const Function* FindFunction(const std::string& name) {
  auto it = Functions().find(name);
  return it == Functions().end() ? nullptr : &it->second;
}

// Recursive descent over the printed forms, lowest precedence first:
//   or: and ('|' and)*   and: not ('&' not)*   not: '~' not | cmp
//   cmp: sum (op sum)?   sum: term (('+'|'-') term)*   term: unary (('*'|'/'|'//'|'%') unary)*
//   unary: '-' unary | power   power: atom ('**' unary)?   atom: number | name | call | '(' or ')'
class Parser {
 public:
  Parser(const std::string& text, std::string where) : s_(text), where_(std::move(where)) {}

  Expected<NodeP> Parse() {
    PARITY_ASSIGN_OR_RETURN(NodeP n, Or());
    Skip();
    if (i_ != s_.size()) return Bad("unexpected \"" + s_.substr(i_, 12) + "\"");
    return n;
  }

 private:
  Error Bad(const std::string& what) const { return Error::BadInput(where_ + ": size expression " + Quoted(s_) + ": " + what); }
  void Skip() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool Eat(const std::string& tok) {
    Skip();
    if (s_.compare(i_, tok.size(), tok) != 0) return false;
    i_ += tok.size();
    return true;
  }
  static NodeP Leaf(Kind k, std::string name, double number = 0) {
    auto n = std::make_shared<Expr::Node>();
    n->kind = k;
    n->name = std::move(name);
    n->number = number;
    return n;
  }
  // An operator or call node; BadInput past kMaxExprDepth, so that neither this parse nor an
  // evaluation or destruction of the tree recurses deeper than that.
  Expected<NodeP> Make(Kind k, std::string name, std::vector<NodeP> args) const {
    auto n = std::make_shared<Expr::Node>();
    n->kind = k;
    n->name = std::move(name);
    for (const auto& a : args) n->depth = std::max(n->depth, a->depth + 1);
    n->args = std::move(args);
    if (n->depth > kMaxExprDepth) return TooDeep();
    return NodeP(std::move(n));
  }
  Error TooDeep() const { return Bad("nested deeper than " + std::to_string(kMaxExprDepth) + " levels"); }
  // Entered by every rule that recurses (parentheses, calls, unary operators): the parse's own
  // depth, bounded before the stack is.
  struct Enter {
    explicit Enter(int& d) : d_(++d) {}
    ~Enter() { --d_; }
    int& d_;
  };
  Expected<NodeP> Or() {
    PARITY_ASSIGN_OR_RETURN(NodeP l, And());
    while (Eat("|")) {
      PARITY_ASSIGN_OR_RETURN(NodeP r, And());
      PARITY_ASSIGN_OR_RETURN(l, Make(Kind::kBinary, "|", {l, r}));
    }
    return l;
  }
  Expected<NodeP> And() {
    PARITY_ASSIGN_OR_RETURN(NodeP l, Not());
    while (Eat("&")) {
      PARITY_ASSIGN_OR_RETURN(NodeP r, Not());
      PARITY_ASSIGN_OR_RETURN(l, Make(Kind::kBinary, "&", {l, r}));
    }
    return l;
  }
  Expected<NodeP> Not() {
    Enter enter(depth_);
    if (depth_ > kMaxExprDepth) return TooDeep();
    if (Eat("~")) {
      PARITY_ASSIGN_OR_RETURN(NodeP a, Not());
      return Make(Kind::kUnary, "~", {a});
    }
    return Cmp();
  }
  Expected<NodeP> Cmp() {
    PARITY_ASSIGN_OR_RETURN(NodeP l, Sum());
    for (const char* op : {"<=", ">=", "==", "!=", "<", ">"})
      if (Eat(op)) {
        PARITY_ASSIGN_OR_RETURN(NodeP r, Sum());
        return Make(Kind::kBinary, op, {l, r});
      }
    return l;
  }
  Expected<NodeP> Sum() {
    PARITY_ASSIGN_OR_RETURN(NodeP l, Term());
    while (true) {
      std::string op = Eat("+") ? "+" : Eat("-") ? "-" : "";
      if (op.empty()) return l;
      PARITY_ASSIGN_OR_RETURN(NodeP r, Term());
      PARITY_ASSIGN_OR_RETURN(l, Make(Kind::kBinary, op, {l, r}));
    }
  }
  Expected<NodeP> Term() {
    PARITY_ASSIGN_OR_RETURN(NodeP l, Unary());
    while (true) {
      Skip();
      std::string op;
      if (s_.compare(i_, 2, "**") == 0) return l;  // power binds tighter: handled below
      if (Eat("//"))
        op = "//";
      else if (Eat("*"))
        op = "*";
      else if (Eat("/"))
        op = "/";
      else if (Eat("%"))
        op = "%";
      else
        return l;
      PARITY_ASSIGN_OR_RETURN(NodeP r, Unary());
      PARITY_ASSIGN_OR_RETURN(l, Make(Kind::kBinary, op, {l, r}));
    }
  }
  Expected<NodeP> Unary() {
    Enter enter(depth_);
    if (depth_ > kMaxExprDepth) return TooDeep();
    if (Eat("-")) {
      PARITY_ASSIGN_OR_RETURN(NodeP a, Unary());
      return Make(Kind::kUnary, "-", {a});
    }
    if (Eat("+")) return Unary();
    return Power();
  }
  Expected<NodeP> Power() {
    PARITY_ASSIGN_OR_RETURN(NodeP base, Atom());
    if (Eat("**")) {
      PARITY_ASSIGN_OR_RETURN(NodeP e, Unary());
      return Make(Kind::kBinary, "**", {base, e});
    }
    return base;
  }
  Expected<NodeP> Atom() {
    Skip();
    if (i_ >= s_.size()) return Bad("ends early");
    if (Eat("(")) {
      Enter enter(depth_);
      if (depth_ > kMaxExprDepth) return TooDeep();
      PARITY_ASSIGN_OR_RETURN(NodeP n, Or());
      if (!Eat(")")) return Bad("missing \")\"");
      return n;
    }
    const char c = s_[i_];
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {
      size_t used = 0;
      double v = 0;
      try {
        v = std::stod(s_.substr(i_), &used);
      } catch (const std::exception&) {
        return Bad("bad number");
      }
      i_ += used;
      return Leaf(Kind::kNumber, "", v);
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t j = i_;
      while (j < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[j])) || s_[j] == '_')) ++j;
      std::string name = s_.substr(i_, j - i_);
      i_ = j;
      if (name == "True") return Leaf(Kind::kNumber, "", 1);
      if (name == "False") return Leaf(Kind::kNumber, "", 0);
      if (!Eat("(")) return Leaf(Kind::kSymbol, name);
      Enter enter(depth_);
      if (depth_ > kMaxExprDepth) return TooDeep();
      std::vector<NodeP> args;
      if (!Eat(")")) {
        while (true) {
          PARITY_ASSIGN_OR_RETURN(NodeP a, Or());
          args.push_back(a);
          if (Eat(")")) break;
          if (!Eat(",")) return Bad("expected \",\" or \")\" in the arguments of " + name);
        }
      }
      const Function* fn = FindFunction(name);
      if (!fn) return Bad("unknown function " + name);
      if (args.size() < fn->min_args || args.size() > fn->max_args || (fn->even_args && args.size() % 2))
        return Bad(name + " takes " + fn->Arity() + " argument(s), not " + std::to_string(args.size()));
      return Make(Kind::kCall, name, std::move(args));
    }
    return Bad("unexpected \"" + std::string(1, c) + "\"");
  }

  const std::string& s_;
  std::string where_;
  size_t i_ = 0;
  int depth_ = 0;  // rules entered and not yet left
};

Error BadValue(const std::string& text, const std::string& what) {
  return Error::BadInput("size expression " + Quoted(text) + ": " + what);
}

// An operator or call applied to its arguments' values.
Expected<double> Apply(const Expr::Node& n, const std::vector<double>& v, const std::string& text) {
  auto bad = [&](const std::string& what) { return BadValue(text, what); };
  if (n.kind == Kind::kUnary) return n.name == "-" ? -v[0] : (v[0] == 0 ? 1.0 : 0.0);
  const std::string& op = n.name;
  if (n.kind == Kind::kBinary) {
    const double x = v[0], y = v[1];
    if ((op == "/" || op == "//" || op == "%") && y == 0) return bad("division by zero");
    if (op == "+") return x + y;
    if (op == "-") return x - y;
    if (op == "*") return x * y;
    if (op == "/") return x / y;
    if (op == "//") return FloorDivOf(x, y);
    if (op == "%") return PyMod(x, y);
    if (op == "**") return std::pow(x, y);
    if (op == "<") return x < y ? 1.0 : 0.0;
    if (op == "<=") return x <= y ? 1.0 : 0.0;
    if (op == ">") return x > y ? 1.0 : 0.0;
    if (op == ">=") return x >= y ? 1.0 : 0.0;
    if (op == "==") return x == y ? 1.0 : 0.0;
    if (op == "!=") return x != y ? 1.0 : 0.0;
    if (op == "&") return (x != 0 && y != 0) ? 1.0 : 0.0;
    if (op == "|") return (x != 0 || y != 0) ? 1.0 : 0.0;
    return bad("unknown operator " + op);
  }
  // Calls: arity was checked by the parse.
  auto r = FindFunction(op)->value(v);
  if (!r.ok()) return bad(op + ": " + r.error().message);
  return r;
}

// Sizes are int64 in every consumer: a value (or a step on the way to it) past that range, or
// not finite, is an error, never a wrapped or infinite size.
Expected<double> EvalNode(const Expr::Node& n, const Bindings& b, const std::string& text) {
  switch (n.kind) {
    case Kind::kNumber: return n.number;
    case Kind::kSymbol: {
      auto it = b.find(n.name);
      if (it == b.end()) return BadValue(text, "symbol " + n.name + " is not bound");
      return static_cast<double>(it->second);
    }
    default: break;
  }
  std::vector<double> v;
  for (const auto& a : n.args) {
    PARITY_ASSIGN_OR_RETURN(double x, EvalNode(*a, b, text));
    v.push_back(x);
  }
  PARITY_ASSIGN_OR_RETURN(double r, Apply(n, v, text));
  constexpr double kInt64 = 9.223372036854775807e18;
  if (!std::isfinite(r) || std::fabs(r) >= kInt64)
    return BadValue(text, "overflows int64 (" + n.name + " gives " + std::to_string(r) + ")");
  return r;
}

void Collect(const Expr::Node& n, std::set<std::string>& out) {
  if (n.kind == Kind::kSymbol) out.insert(n.name);
  for (const auto& a : n.args) Collect(*a, out);
}

}  // namespace

Expected<Expr> Expr::Parse(const std::string& text, const std::string& where) {
  Parser p(text, where);
  PARITY_ASSIGN_OR_RETURN(NodeP root, p.Parse());
  Expr e;
  e.root_ = std::move(root);
  e.text_ = text;
  return e;
}

Expected<double> Expr::Eval(const Bindings& b) const { return EvalNode(*root_, b, text_); }

Expected<int64_t> Expr::EvalInt(const Bindings& b) const {
  PARITY_ASSIGN_OR_RETURN(double v, Eval(b));
  if (!std::isfinite(v) || std::floor(v) != v || std::fabs(v) > 9.0e15)
    return Error::BadInput("size expression " + Quoted(text_) + " is " + std::to_string(v) + ", not an integer");
  return static_cast<int64_t>(v);
}

std::set<std::string> Expr::Symbols() const {
  std::set<std::string> out;
  Collect(*root_, out);
  return out;
}

std::string Expr::AsSymbol() const { return root_->kind == Kind::kSymbol ? root_->name : ""; }

}  // namespace parity::sym
