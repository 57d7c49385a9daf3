// Size expressions of symbolic graphs, as the capture writes them (sympy's printing of a
// ShapeEnv's expressions: `s77`, `2*s77 + 1`, `(s0//2)`, `Mod(s0, 8)`, `Max(1, s0)`, guards such
// as `Eq(s27, 8)`, `Ne(s77, 1)`, `s77 >= 2`). Parsed once, evaluated over bindings of the
// symbols to integers. Reads text only; knows nothing of tensors.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "util/status.h"

namespace parity::sym {

using Bindings = std::map<std::string, int64_t>;

// How deep an expression may nest (parentheses, calls, operators): sympy prints a ShapeEnv's
// expressions a few levels deep; a file nesting deeper is bad input, never a deep recursion.
inline constexpr int kMaxExprDepth = 200;

// An expression as error messages show it: quoted whole when short, else its start and its length
// (a hostile file's expression can be megabytes).
std::string Quoted(const std::string& text);

class Expr {
 public:
  // kBadInput naming `where` when `text` is not an expression of the supported forms: integers,
  // symbols, + - * / // % ** and unary -, parentheses, < <= > >= == !=, & | ~, True/False, and
  // calls of the functions torch's ShapeEnv prints (torch/utils/_sympy/functions.py: FloorDiv,
  // ToFloat, RoundToInt, OpaqueUnaryFn_sqrt, BitwiseFn_bitwise_and, ...; the table in
  // sym_expr.cpp) with their number of arguments; nested at most kMaxExprDepth deep.
  [[nodiscard]] static Expected<Expr> Parse(const std::string& text, const std::string& where);

  // The value (booleans are 0/1); kBadInput naming the symbol when one is unbound, and on a
  // division by zero.
  [[nodiscard]] Expected<double> Eval(const Bindings& b) const;
  // The value as an integer (sizes): kBadInput when it is not one.
  [[nodiscard]] Expected<int64_t> EvalInt(const Bindings& b) const;
  // Every symbol it reads.
  std::set<std::string> Symbols() const;
  // A plain symbol ("s77"): its name; else "".
  std::string AsSymbol() const;
  const std::string& text() const { return text_; }

  struct Node;

 private:
  std::shared_ptr<const Node> root_;
  std::string text_;
};

}  // namespace parity::sym
