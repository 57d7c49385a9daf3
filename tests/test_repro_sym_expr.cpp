#include "repro/sym_expr.h"

#include <gtest/gtest.h>

#include <cmath>

namespace parity::sym {
namespace {

int64_t IntOf(const std::string& text, const Bindings& b) {
  auto e = Expr::Parse(text, "t");
  EXPECT_TRUE(e.ok()) << text << ": " << e.error().message;
  auto v = e->EvalInt(b);
  EXPECT_TRUE(v.ok()) << text << ": " << v.error().message;
  return v.ok() ? *v : -999;
}

TEST(SymExpr, EvaluatesWhatSympyPrints) {
  const Bindings b = {{"s0", 7}, {"s77", 12}};
  EXPECT_EQ(IntOf("s77", b), 12);
  EXPECT_EQ(IntOf("2*s77 + 1", b), 25);
  EXPECT_EQ(IntOf("(s0//2)", b), 3);
  EXPECT_EQ(IntOf("-s0//2", b), -4);  // floor division rounds toward -inf, as Python's
  EXPECT_EQ(IntOf("Mod(s0, 4)", b), 3);
  EXPECT_EQ(IntOf("Max(1, s0 - 10)", b), 1);
  EXPECT_EQ(IntOf("Min(s0, s77)", b), 7);
  EXPECT_EQ(IntOf("FloorDiv(s77, 5)", b), 2);
  EXPECT_EQ(IntOf("CeilDiv(s77, 5)", b), 3);
  EXPECT_EQ(IntOf("s0**2", b), 49);
  EXPECT_EQ(IntOf("Eq(s77, 12)", b), 1);
  EXPECT_EQ(IntOf("Ne(s77, 1) & (s0 >= 2)", b), 1);
  EXPECT_EQ(IntOf("s0 < 2", b), 0);
}

double ValueOf(const std::string& text, const Bindings& b) {
  auto e = Expr::Parse(text, "t");
  EXPECT_TRUE(e.ok()) << text << ": " << e.error().message;
  auto v = e->Eval(b);
  EXPECT_TRUE(v.ok()) << text << ": " << v.error().message;
  return v.ok() ? *v : -999;
}

// Sizes in arithmetic (`round(n / 2)`, `n << 1`, `n ^ 3`, `math.sqrt(n)`, `float(t) / n`): the
// functions torch's ShapeEnv prints for them, each evaluated as Python computes the value.
TEST(SymExpr, EvaluatesTorchsSizeFunctions) {
  const Bindings b = {{"s0", 5}, {"s1", 6}};
  EXPECT_EQ(IntOf("RoundToInt(IntTrueDiv(s0, 2))", b), 2);  // round(2.5) = 2: halves to even
  EXPECT_EQ(IntOf("RoundToInt(IntTrueDiv(s0 + 2, 2))", b), 4);  // round(3.5) = 4
  EXPECT_DOUBLE_EQ(ValueOf("RoundDecimal(FloatTrueDiv(ToFloat(s0), 3.0), 2)", b), 1.67);
  EXPECT_EQ(IntOf("BitwiseFn_bitwise_xor(s0, 3) + BitwiseFn_bitwise_and(s0, 6) + BitwiseFn_bitwise_or(s0, 2)", b), 6 + 4 + 7);
  EXPECT_EQ(IntOf("LShift(s0, 2) + RShift(s1, 1)", b), 20 + 3);
  EXPECT_EQ(IntOf("CeilToInt(IntTrueDiv(s0, 3)) + FloorToInt(IntTrueDiv(s1, 4)) + TruncToInt(1.5*ToFloat(s0))", b), 2 + 1 + 7);
  EXPECT_EQ(IntOf("PowByNatural(s0, 2) + ModularIndexing(s1 + 7, 2, 4) + Where(s0 > 3, 10, 20)", b), 25 + 2 + 10);
  EXPECT_DOUBLE_EQ(ValueOf("OpaqueUnaryFn_sqrt(ToFloat(s0)) + OpaqueUnaryFn_cos(ToFloat(s1))", b), std::sqrt(5.0) + std::cos(6.0));
  EXPECT_DOUBLE_EQ(ValueOf("FloatPow(2.0, IntTrueDiv(s0, 4)) + TruncToFloat(2.7) + Identity(s1)", b), std::pow(2.0, 1.25) + 2 + 6);
  // sizes 5, 6 with strides 6, 1 are dense; strides 6, 2 are not; a size-1 dim's stride is free
  EXPECT_EQ(IntOf("IsNonOverlappingAndDenseIndicator(s0, s1, 6, 1)", b), 1);
  EXPECT_EQ(IntOf("IsNonOverlappingAndDenseIndicator(s0, s1, 12, 2)", b), 0);
  EXPECT_EQ(IntOf("IsNonOverlappingAndDenseIndicator(1, s1, 99, 1)", b), 1);
}

TEST(SymExpr, AFunctionsArgumentCountIsCheckedWhenParsed) {
  for (const char* bad : {"ToFloat(s0, 2)", "Where(s0, 1)", "IsNonOverlappingAndDenseIndicator(s0, s1, 1)", "Max()"}) {
    auto e = Expr::Parse(bad, "graph.json: nodes[1].meta.sym");
    ASSERT_FALSE(e.ok()) << bad;
    EXPECT_NE(e.error().message.find("argument"), std::string::npos) << e.error().message;
  }
  auto zero = Expr::Parse("ModularIndexing(s0, s1, 4)", "t");
  ASSERT_TRUE(zero.ok());
  EXPECT_FALSE(zero->Eval({{"s0", 1}, {"s1", 0}}).ok());  // division by zero is an error, never inf
  EXPECT_FALSE(Expr::Parse("OpaqueUnaryFn_log(ToFloat(s0))", "t")->Eval({{"s0", 0}}).ok());  // -inf is no value
  EXPECT_FALSE(Expr::Parse("BitwiseFn_bitwise_and(1e300, s0)", "t")->Eval({{"s0", 1}}).ok());  // no int64 to cast to
}

TEST(SymExpr, KnowsItsSymbols) {
  auto e = Expr::Parse("Max(s1, 2*s0 + s1)", "t");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->Symbols(), (std::set<std::string>{"s0", "s1"}));
  EXPECT_EQ(e->AsSymbol(), "");
  EXPECT_EQ(Expr::Parse("s5", "t")->AsSymbol(), "s5");
}

TEST(SymExpr, BadTextNamesWhere) {
  for (const char* bad : {"s0 +", "foo(s0)", "s0 $ 2", "(s0", ""}) {
    auto e = Expr::Parse(bad, "graph.json: nodes[3].meta.sym");
    ASSERT_FALSE(e.ok()) << bad;
    EXPECT_EQ(e.error().kind, ErrorKind::kBadInput);
    EXPECT_NE(e.error().message.find("nodes[3].meta.sym"), std::string::npos) << e.error().message;
  }
}

TEST(SymExpr, UnboundSymbolAndDivisionByZeroAreErrors) {
  auto e = Expr::Parse("s0 // s1", "t");
  ASSERT_TRUE(e.ok());
  auto unbound = e->Eval({{"s0", 4}});
  ASSERT_FALSE(unbound.ok());
  EXPECT_NE(unbound.error().message.find("s1"), std::string::npos);
  EXPECT_FALSE(e->Eval({{"s0", 4}, {"s1", 0}}).ok());
  EXPECT_FALSE(Expr::Parse("s0 / 2", "t")->EvalInt({{"s0", 3}}).ok());  // 1.5 is no size
}

}  // namespace
}  // namespace parity::sym
