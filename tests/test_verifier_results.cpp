#include "verifier/results.h"

#include "verifier/experiment.h"

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

TEST(Results, AppendAndResumeIgnoreTornLines) {
  testing::TempDir dir;
  auto file = dir / "results.jsonl";
  ASSERT_TRUE(AppendJsonLine(file, {{"fingerprint", "a"}}).ok());
  ASSERT_TRUE(AppendJsonLine(file, {{"fingerprint", "b"}}).ok());
  std::ofstream(file, std::ios::app) << "{\"fingerprint\": \"c\"";  // a line cut by a kill
  auto done = DoneFingerprints(file);
  EXPECT_EQ(done, (std::set<std::string>{"a", "b"}));
}

TEST(Results, RecordCarriesSpecResultAndContext) {
  ExperimentSpec spec;
  spec.model = "llama";
  spec.suite = "huggingface";
  spec.backend = "inductor";
  ExperimentResult r;
  r.code = Code::kExceptionRaised;
  r.error = "boom";
  r.exception_type = "ValueError";
  r.phase = "backend";
  RecordContext ctx;
  ctx.accelerator_model = "cpu";
  ctx.batch_size = 2;
  ctx.repro_dir = "/r";
  auto line = ResultRecord(spec, r, ctx);
  EXPECT_EQ(line["model"]["suite_name"], "huggingface");
  EXPECT_EQ(line["experiment"]["batch_size"], 2);
  EXPECT_EQ(line["verification_code"], "EXCEPTION_RAISED");
  EXPECT_EQ(line["exception_type"], "ValueError");
  EXPECT_EQ(line["phase"], "backend");
  EXPECT_EQ(line["repro_dir"], "/r");
  EXPECT_EQ(line["fingerprint"], spec.Fingerprint());
  EXPECT_FALSE(line.contains("repro_input"));
}

TEST(Results, AMissingFp64ReferenceIsAFieldNotANote) {
  ExperimentSpec spec;
  ExperimentResult r;
  r.code = Code::kPass;
  auto line = ResultRecord(spec, r, RecordContext{});
  EXPECT_EQ(line["fp64_reference"], true);
  EXPECT_FALSE(LacksFp64Reference(line));
  EXPECT_EQ(WeakerRuleNote(line), "");
  r.reference_error = "node \"mm\" (aten::_weight_int8pack_mm): expect A to be either 32-bit or 16-bit float tensor";
  r.cosine = true;
  line = ResultRecord(spec, r, RecordContext{});
  EXPECT_EQ(line["fp64_reference"], false);
  EXPECT_EQ(line["reference_error"], r.reference_error);
  EXPECT_TRUE(LacksFp64Reference(line));
  EXPECT_NE(WeakerRuleNote(line).find("decided by cosine similarity"), std::string::npos);
  r.code = Code::kExceptionRaised;  // no comparison ran: nothing to say about the reference
  EXPECT_FALSE(ResultRecord(spec, r, RecordContext{}).contains("fp64_reference"));
  EXPECT_EQ(ExperimentResult::FromJson(r.ToJson()).reference_error, r.reference_error);
}

}  // namespace
}  // namespace parity::verifier
