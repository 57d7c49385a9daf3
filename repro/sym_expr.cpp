#include "repro/sym_expr.h"

#include <cctype>
#include <cmath>
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
      static const std::set<std::string> known = {"Eq",        "Ne",         "Lt",         "Le",          "Gt",
                                                  "Ge",        "Mod",        "PythonMod",  "FloorDiv",    "CeilDiv",
                                                  "Max",       "Min",        "Abs",        "floor",       "ceiling",
                                                  "TruncToInt", "IntTrueDiv", "FloatTrueDiv", "And",       "Or",
                                                  "Not",       "CleanDiv",   "FloorToInt", "CeilToInt"};
      if (!known.count(name)) return Bad("unknown function " + name);
      return Make(Kind::kCall, name, std::move(args));
    }
    return Bad("unexpected \"" + std::string(1, c) + "\"");
  }

  const std::string& s_;
  std::string where_;
  size_t i_ = 0;
  int depth_ = 0;  // rules entered and not yet left
};

double FloorDivOf(double a, double b) { return std::floor(a / b); }
double PyMod(double a, double b) { return a - b * std::floor(a / b); }

Error BadValue(const std::string& text, const std::string& what) {
  return Error::BadInput("size expression " + Quoted(text) + ": " + what);
}

// An operator or call applied to its arguments' values.
Expected<double> Apply(const Expr::Node& n, const std::vector<double>& v, const std::string& text) {
  auto bad = [&](const std::string& what) { return BadValue(text, what); };
  auto need = [&](size_t k) -> Status {
    if (v.size() != k) return bad(n.name + " takes " + std::to_string(k) + " argument(s)");
    return Status::Ok();
  };
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
  // Calls.
  if (op == "Max" || op == "Min") {
    if (v.empty()) return bad(op + " of nothing");
    double r = v[0];
    for (double x : v) r = op == "Max" ? std::max(r, x) : std::min(r, x);
    return r;
  }
  if (op == "And" || op == "Or") {
    bool r = op == "And";
    for (double x : v) r = op == "And" ? (r && x != 0) : (r || x != 0);
    return r ? 1.0 : 0.0;
  }
  if (op == "Abs" || op == "floor" || op == "ceiling" || op == "TruncToInt" || op == "Not" || op == "FloorToInt" ||
      op == "CeilToInt") {
    PARITY_RETURN_IF_ERROR(need(1));
    if (op == "Abs") return std::fabs(v[0]);
    if (op == "floor" || op == "FloorToInt") return std::floor(v[0]);
    if (op == "ceiling" || op == "CeilToInt") return std::ceil(v[0]);
    if (op == "TruncToInt") return std::trunc(v[0]);
    return v[0] == 0 ? 1.0 : 0.0;
  }
  PARITY_RETURN_IF_ERROR(need(2));
  const double x = v[0], y = v[1];
  if ((op == "Mod" || op == "PythonMod" || op == "FloorDiv" || op == "CeilDiv" || op == "IntTrueDiv" || op == "FloatTrueDiv" ||
       op == "CleanDiv") &&
      y == 0)
    return bad("division by zero");
  if (op == "Eq") return x == y ? 1.0 : 0.0;
  if (op == "Ne") return x != y ? 1.0 : 0.0;
  if (op == "Lt") return x < y ? 1.0 : 0.0;
  if (op == "Le") return x <= y ? 1.0 : 0.0;
  if (op == "Gt") return x > y ? 1.0 : 0.0;
  if (op == "Ge") return x >= y ? 1.0 : 0.0;
  if (op == "Mod" || op == "PythonMod") return PyMod(x, y);
  if (op == "FloorDiv" || op == "CleanDiv") return FloorDivOf(x, y);
  if (op == "CeilDiv") return std::ceil(x / y);
  return x / y;  // IntTrueDiv, FloatTrueDiv
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
