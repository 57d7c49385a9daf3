#include "minifier/signature.h"

#include <gtest/gtest.h>

namespace parity::minifier {
namespace {

TEST(Signature, NormalizesWhatVariesBetweenRuns) {
  EXPECT_EQ(NormalizeMessage("node \"index_12\" failed at 0x7f3a9c in /tmp/x/y.cpp:42\nsecond line"),
            "node \"index_#\" failed at <addr> in <path>:#");
  EXPECT_EQ(NormalizeMessage(""), "");
}

TEST(Signature, LongLinesDoNotOverflowTheStack) {
  // Compilers print single lines of hundreds of kilobytes; a recursive regex dies on them.
  std::string s = "/" + std::string(200000, 'a') + " " + std::string(200000, '7');
  EXPECT_EQ(NormalizeMessage(s), "<path>");
}

TEST(Signature, MatchesOnlyTheSameKindOfFailure) {
  experiment::ExperimentResult fail, raise, crash, pass;
  fail.code = experiment::Code::kFail;
  raise.code = experiment::Code::kExceptionRaised;
  raise.exception_type = "RuntimeError";
  raise.error = "bad thing 12";
  crash.code = experiment::Code::kVerifierDidntRun;
  crash.signal = 11;
  pass.code = experiment::Code::kPass;
  Signature a = Signature::FromResult(fail), e = Signature::FromResult(raise), c = Signature::FromResult(crash);
  EXPECT_TRUE(a.Matches(a));
  EXPECT_FALSE(e.Matches(a));
  EXPECT_FALSE(Signature::FromResult(pass).Matches(Signature::FromResult(pass)));
  raise.error = "bad thing 13";
  EXPECT_TRUE(Signature::FromResult(raise).Matches(e));
  raise.exception_type = "ValueError";
  EXPECT_FALSE(Signature::FromResult(raise).Matches(e));
  crash.signal = 6;
  EXPECT_FALSE(Signature::FromResult(crash).Matches(c));
  auto back = Signature::FromJson(e.ToJson());
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back->Matches(e));
}

// A run of several graphs names the failing graph before its error; the same graph run alone (graph
// bisection) does not: the same failure. Another message behind a graph's name is not.
TEST(Signature, AnExceptionBehindAGraphsNameIsTheSameFailure) {
  experiment::ExperimentResult several, alone, other;
  for (auto* r : {&several, &alone, &other}) {
    r->code = experiment::Code::kExceptionRaised;
    r->exception_type = "InductorError";
  }
  several.failed_graph = other.failed_graph = "graph_0";  // the result names the graph its error names
  several.error = "graph_0: InductorError: TypeError: cannot determine truth value of Relational: 8*s62 < s62";
  alone.error = "InductorError: TypeError: cannot determine truth value of Relational: 8*s62 < s62";
  other.error = "graph_0: InductorError: TypeError: something else";
  const Signature s = Signature::FromResult(several), a = Signature::FromResult(alone), o = Signature::FromResult(other);
  EXPECT_TRUE(s.Matches(a));
  EXPECT_TRUE(a.Matches(s));
  EXPECT_FALSE(o.Matches(a));
  EXPECT_FALSE(a.Matches(o));
  alone.error = "TypeError: cannot determine truth value of Relational: 8*s62 < s62";  // not a graph's name: words
  EXPECT_FALSE(Signature::FromResult(alone).Matches(Signature::FromResult(several)));
}

// An accuracy failure is about its outputs' values, dtypes or shapes: a candidate whose outputs
// fail only on a dtype does not stand for an original whose values were off (the drift a
// bfloat16 model's reduction made: a prefix's loss summed from bfloat16 and float32 values).
TEST(Signature, AccuracyFailuresMatchOnlyWhereTheyFailForTheSameReason) {
  experiment::ExperimentResult values, dtype, both, unlisted;
  values.code = dtype.code = both.code = unlisted.code = experiment::Code::kFail;
  values.outputs = nlohmann::json::array({{{"pass", true}, {"rule", "allclose"}}, {{"pass", false}, {"rule", "rmse"}}});
  dtype.outputs = nlohmann::json::array({{{"pass", false}, {"rule", "dtype_mismatch"}}});
  both.outputs = nlohmann::json::array({{{"pass", false}, {"rule", "dtype_mismatch"}}, {{"pass", false}, {"rule", "noise_budget"}}});
  const Signature v = Signature::FromResult(values), d = Signature::FromResult(dtype), b = Signature::FromResult(both);
  EXPECT_EQ(v.accuracy_classes, (std::vector<std::string>{"values"}));
  EXPECT_EQ(b.accuracy_classes, (std::vector<std::string>{"dtype", "values"}));
  EXPECT_FALSE(d.Matches(v));
  EXPECT_FALSE(v.Matches(d));
  EXPECT_TRUE(v.Matches(b));
  EXPECT_TRUE(d.Matches(b));
  EXPECT_TRUE(Signature::FromResult(unlisted).Matches(v));  // a result without outputs says nothing against it
  EXPECT_EQ(d.Describe(), "accuracy (dtype)");
  // Off by rounding only (within the output's noise budget) is not off beyond it.
  experiment::ExperimentResult rounding;
  rounding.code = experiment::Code::kFail;
  rounding.outputs = nlohmann::json::array(
      {{{"pass", false}, {"rule", "rmse"}, {"noise_budget", {{"check", {{"within", true}, {"budgets", 0.39}}}}}}});
  const Signature r = Signature::FromResult(rounding);
  EXPECT_EQ(r.accuracy_classes, (std::vector<std::string>{"rounding"}));
  EXPECT_FALSE(r.Matches(v));
  EXPECT_TRUE(r.Matches(r));
  auto back = Signature::FromJson(b.ToJson());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->accuracy_classes, b.accuracy_classes);
  EXPECT_FALSE(Signature::FromJson({{"kind", "accuracy"}, {"accuracy_classes", 3}}).ok());
}

}  // namespace
}  // namespace parity::minifier
