#include "experiment/experiment.h"

#include <gtest/gtest.h>

namespace parity::experiment {
namespace {

TEST(Experiment, FingerprintIgnoresScratchPaths) {
  ExperimentSpec a;
  a.model = "llama";
  a.backend = "inductor";
  ExperimentSpec b = a;
  b.work_dir = "/elsewhere";
  b.repro = "/other/capture";
  b.verified_tensors = "/other/capture/tensors.safetensors|123|456|abc";
  EXPECT_EQ(a.Fingerprint(), b.Fingerprint());
  auto b_back = ExperimentSpec::FromJson(b.ToJson());
  ASSERT_TRUE(b_back.ok());
  EXPECT_EQ(b_back->verified_tensors, b.verified_tensors);  // what the child is told the driver hashed
  b.backend_options["max_autotune"] = "True";
  EXPECT_NE(a.Fingerprint(), b.Fingerprint());
  auto back = ExperimentSpec::FromJson(a.ToJson());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->Fingerprint(), a.Fingerprint());
}

TEST(Experiment, FingerprintIsAStableDigest) {
  // A SHA-256 (hex) of the defining fields: the same on every toolchain and parity build.
  ExperimentSpec a;
  a.model = "llama";
  a.suite = "huggingface";
  a.backend = "inductor";
  EXPECT_EQ(a.Fingerprint().size(), 32u);
  EXPECT_EQ(a.Fingerprint(), "d8b8b707d179311f125de07874b24b88");
}

TEST(Experiment, ResultKeepsTheWorkerExceptionApart) {
  ExperimentResult r;
  r.code = Code::kExceptionRaised;
  r.exception_type = "torch._dynamo.exc.BackendCompilerFailed";
  r.traceback = "Traceback (most recent call last): ...";
  ExperimentResult back = ExperimentResult::FromJson(r.ToJson());
  EXPECT_EQ(back.exception_type, r.exception_type);
  EXPECT_EQ(back.traceback, r.traceback);
}

TEST(Experiment, ResultCarriesTheDeviceItsChildRanOn) {
  ExperimentResult r;
  r.code = Code::kPass;
  r.device_name = "NVIDIA H200";
  EXPECT_EQ(ExperimentResult::FromJson(r.ToJson()).device_name, "NVIDIA H200");
  EXPECT_EQ(ExperimentResult::FromJson(ExperimentResult().ToJson()).device_name, "");
}

}  // namespace
}  // namespace parity::experiment
