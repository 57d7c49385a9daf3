#include "verifier/results.h"

#include <gtest/gtest.h>

#include <fstream>

#include "test_helpers.h"

namespace parity::verifier {
namespace {

TEST(Results, CodesRoundTrip) {
  for (auto c : {Code::kPass, Code::kFail, Code::kEagerFailed, Code::kExceptionRaised, Code::kNondeterministicEagerRun,
                 Code::kVerifierSkipped, Code::kVerifierDidntRun})
    EXPECT_EQ(*ParseCode(ToString(c)), c);
  EXPECT_FALSE(ParseCode("MAYBE").ok());
  EXPECT_FALSE(IsFailure(Code::kPass));
  EXPECT_FALSE(IsFailure(Code::kVerifierSkipped));
  EXPECT_TRUE(IsFailure(Code::kVerifierDidntRun));
}

TEST(Results, FingerprintIgnoresScratchPaths) {
  ExperimentSpec a;
  a.model = "llama";
  a.backend = "inductor";
  ExperimentSpec b = a;
  b.work_dir = "/elsewhere";
  b.repro = "/other/capture";
  EXPECT_EQ(a.Fingerprint(), b.Fingerprint());
  b.backend_options["max_autotune"] = "True";
  EXPECT_NE(a.Fingerprint(), b.Fingerprint());
  auto back = ExperimentSpec::FromJson(a.ToJson());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->Fingerprint(), a.Fingerprint());
}

TEST(Results, AppendAndResumeIgnoreTornLines) {
  testing::TempDir dir;
  auto file = dir / "results.jsonl";
  ASSERT_TRUE(AppendJsonLine(file, {{"fingerprint", "a"}}).ok());
  ASSERT_TRUE(AppendJsonLine(file, {{"fingerprint", "b"}}).ok());
  std::ofstream(file, std::ios::app) << "{\"fingerprint\": \"c\"";  // a line cut by a kill
  auto done = DoneFingerprints(file);
  EXPECT_EQ(done, (std::set<std::string>{"a", "b"}));
}

TEST(Results, DefaultTolerancesFollowPyTorchSuites) {
  EXPECT_DOUBLE_EQ(DefaultTolerance("huggingface", "eval", "float32"), 1e-3);
  EXPECT_DOUBLE_EQ(DefaultTolerance("huggingface", "train", "float32"), 1e-2);
  EXPECT_DOUBLE_EQ(DefaultTolerance("torchvision-style", "eval", "float32"), 1e-3);
  EXPECT_DOUBLE_EQ(DefaultTolerance("toy", "eval", "float32"), 1e-4);
  EXPECT_DOUBLE_EQ(DefaultTolerance("toy", "train", "float32"), 1e-3);
  EXPECT_DOUBLE_EQ(DefaultTolerance("toy", "eval", "bfloat16"), 1e-3);
}

}  // namespace
}  // namespace parity::verifier
