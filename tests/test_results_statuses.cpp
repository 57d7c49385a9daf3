#include "results/statuses.h"

#include <gtest/gtest.h>

#include "ci_records.h"

namespace parity::results {
namespace {

using testing::Rec;

TEST(Statuses, EveryCodeMapsToADynamoRunnerStatus) {
  EXPECT_EQ(StatusOf(Rec("m", "PASS")), "pass");
  EXPECT_EQ(StatusOf(Rec("m", "FAIL", "compare")), "fail_accuracy");
  EXPECT_EQ(StatusOf(Rec("m", "NONDETERMINISTIC_EAGER_RUN", "eager_2nd_run")), "eager_two_runs_differ");
  EXPECT_EQ(StatusOf(Rec("m", "VERIFIER_SKIPPED", "capability")), "pass_due_to_skip");
  EXPECT_EQ(StatusOf(Rec("m", "EAGER_FAILED", "capture")), "model_fail_to_load");
  EXPECT_EQ(StatusOf(Rec("m", "EAGER_FAILED", "load")), "model_fail_to_load");
  EXPECT_EQ(StatusOf(Rec("m", "EAGER_FAILED", "eager")), "eager_1st_run_fail");
  EXPECT_EQ(StatusOf(Rec("m", "EAGER_FAILED", "eager_2nd_run")), "eager_2nd_run_fail");
  EXPECT_EQ(StatusOf(Rec("m", "EAGER_FAILED", "fp64_reference")), "eager_fail_to_run");
  EXPECT_EQ(StatusOf(Rec("m", "EXCEPTION_RAISED", "backend")), "fail_to_run");
  EXPECT_EQ(StatusOf(Rec("m", "VERIFIER_DIDNT_RUN", "backend")), "fail_to_run");
  EXPECT_EQ(StatusOf(Rec("m", "VERIFIER_DIDNT_RUN", "eager")), "eager_fail_to_run");
  auto t = Rec("m", "VERIFIER_DIDNT_RUN", "backend");
  t.timed_out = true;
  EXPECT_EQ(StatusOf(t), "timeout");
  for (const auto& r : {Rec("m", "PASS"), Rec("m", "FAIL"), t}) EXPECT_TRUE(IsKnownStatus(StatusOf(r)));
}

TEST(Statuses, OutOfMemoryIsOOM) {
  auto r = Rec("m", "EXCEPTION_RAISED", "backend");
  r.exception_type = "torch.OutOfMemoryError";
  EXPECT_EQ(StatusOf(r), "OOM");
  auto e = Rec("m", "EAGER_FAILED", "eager");
  e.error = "CUDA out of memory. Tried to allocate 2.00 GiB";
  EXPECT_EQ(StatusOf(e), "eager_1st_run_OOM");
  e.phase = "eager_2nd_run";
  EXPECT_EQ(StatusOf(e), "eager_2nd_run_OOM");
}

TEST(Statuses, AttemptsMapLikeRecords) {
  Attempt a;
  a.code = Code::kVerifierDidntRun;
  a.timed_out = true;
  EXPECT_EQ(StatusOf(a), "timeout");
  a.code = Code::kFail;
  EXPECT_EQ(StatusOf(a), "fail_accuracy");
  auto r = Rec("m", "EAGER_FAILED", "eager");
  EXPECT_EQ(StatusOf(r.FirstAttempt()), StatusOf(r));
}

TEST(Statuses, ConfigNamesFollowPyTorchsExpectedFiles) {
  // The names of PyTorch's ci_expected_accuracy/ files for what its CI runs (.ci/pytorch/test.sh):
  // CUDA training under --amp and inference in --bfloat16, the CPU in float32, no dtype in the name.
  EXPECT_EQ(ConfigName("inductor", "huggingface", "amp", "train", "cuda"), "inductor_huggingface_training");
  EXPECT_EQ(ConfigName("inductor", "huggingface", "bfloat16", "eval", "cuda"), "inductor_huggingface_inference");
  EXPECT_EQ(ConfigName("aot_eager", "timm", "amp", "train", "cuda:1"), "aot_eager_timm_training");
  EXPECT_EQ(ConfigName("inductor", "torchbench", "float32", "eval", "cpu"), "cpu_inductor_torchbench_inference");
  EXPECT_EQ(ConfigName("aot_inductor", "huggingface", "bfloat16", "eval", "cuda"), "aot_inductor_huggingface_inference");
  // Another dtype is named after the backend, as PyTorch names its amp CPU files (cpu_inductor_amp_freezing_...).
  EXPECT_EQ(ConfigName("inductor", "timm", "amp", "eval", "cpu"), "cpu_inductor_amp_timm_inference");
  EXPECT_EQ(ConfigName("inductor", "huggingface", "float32", "eval", "cuda"), "inductor_float32_huggingface_inference");
  EXPECT_EQ(ConfigName("my_npu", "huggingface", "bfloat16", "eval", "cpu"), "cpu_my_npu_bfloat16_huggingface_inference");
  EXPECT_EQ(ConfigOf(Rec("m", "PASS")), testing::kConfig);
}

TEST(Statuses, ARecordsOwnConfigurationWins) {
  auto r = Rec("m", "PASS", "", 1e-8, "torch_compile:aot_eager");
  EXPECT_EQ(ConfigOf(r), "cpu_aot_eager_repro_inference");  // an older record: named as PyTorch names it
  r.experiment.config = "cpu_torch_compile_aot_eager_repro_inference";  // what verify records (parity has its own aot_eager)
  EXPECT_EQ(ConfigOf(r), r.experiment.config);
}

}  // namespace
}  // namespace parity::results
