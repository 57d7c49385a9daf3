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
  verifier::ExperimentResult fail, raise, crash, pass;
  fail.code = verifier::Code::kFail;
  raise.code = verifier::Code::kExceptionRaised;
  raise.exception_type = "RuntimeError";
  raise.error = "bad thing 12";
  crash.code = verifier::Code::kVerifierDidntRun;
  crash.signal = 11;
  pass.code = verifier::Code::kPass;
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

}  // namespace
}  // namespace parity::minifier
