#include "repro/sym_expr.h"

#include <gtest/gtest.h>

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
