#include "results/record.h"

#include <gtest/gtest.h>

#include <cmath>
#include <ctime>
#include <fstream>
#include <limits>

#include "ci_records.h"
#include "test_helpers.h"

namespace parity::results {
namespace {

TEST(Codes, RoundTrip) {
  for (auto c : {Code::kPass, Code::kFail, Code::kEagerFailed, Code::kExceptionRaised, Code::kNondeterministicEagerRun,
                 Code::kVerifierSkipped, Code::kVerifierDidntRun})
    EXPECT_EQ(*ParseCode(ToString(c)), c);
  EXPECT_FALSE(ParseCode("MAYBE").ok());
  EXPECT_FALSE(IsFailure(Code::kPass));
  EXPECT_FALSE(IsFailure(Code::kVerifierSkipped));
  EXPECT_TRUE(IsFailure(Code::kVerifierDidntRun));
}

TEST(Record, NowIsTheEpochsSecondsToTheMicrosecond) {
  // Records' timestamps order experiments that end within one second of each other.
  const double before = static_cast<double>(std::time(nullptr));
  double a = results::Now(), b = a;
  while (b == a) b = results::Now();
  EXPECT_GE(a, before);
  EXPECT_LE(a, before + 2.0);
  EXPECT_LT(b - a, 0.5);
  EXPECT_GT(b, a);
  bool fractional = false;
  for (int i = 0; i < 100 && !fractional; ++i) fractional = std::fmod(results::Now(), 1.0) != 0.0;
  EXPECT_TRUE(fractional);
}

TEST(Record, RoundTripsEveryFieldAndKeepsUnknownOnes) {
  nlohmann::json j = testing::RecJson("llama", "FAIL", "compare");
  j["experiment"]["config"] = "cpu_fault_repro_inference";
  j["error"] = "logits: RMSE ...";
  j["fp64_reference"] = false;
  j["reference_error"] = "node view_4";
  j["graph_breaks"] = 2;
  j["attempts"] = {{{"verification_code", "FAIL"}, {"phase", "compare"}}, {{"verification_code", "PASS"}}};
  j["from_a_newer_parity"] = {{"x", 1}};
  j["distributed"] = {{"rank", 1}, {"world_size", 2}, {"replay", "real"}};
  j["metrics"]["phase_seconds"] = {{"compile", 2.5}, {"eager", 0.5}};
  j["metrics"]["peak_memory_bytes"] = {{"reference", 1024}, {"backend", 2048}};
  auto r = Record::FromJson(j, "results.jsonl:3");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->model, "llama");
  EXPECT_EQ(r->code, Code::kFail);
  EXPECT_TRUE(r->LacksFp64Reference());
  EXPECT_EQ(*r->graph_breaks, 2);
  ASSERT_EQ(r->attempts.size(), 2u);
  EXPECT_EQ(r->attempts[1].code, Code::kPass);
  const nlohmann::json back = r->ToJson();
  EXPECT_EQ(Record::FromJson(back, "again")->ToJson(), back);  // stable
  for (const char* key : {"model", "verification_code", "fingerprint", "error", "fp64_reference", "reference_error", "graph_breaks",
                          "attempts", "outputs", "phase", "from_a_newer_parity", "distributed"})
    EXPECT_EQ(back[key], j[key]) << key;  // the same fields back, the unknown one included
  EXPECT_EQ(back["experiment"]["config"], "cpu_fault_repro_inference");
  EXPECT_EQ(r->metrics.phase_seconds.at("compile"), 2.5);
  EXPECT_EQ(r->metrics.peak_memory_bytes.at("backend"), 2048);
  EXPECT_EQ(back["metrics"]["phase_seconds"], j["metrics"]["phase_seconds"]);
  j["metrics"]["phase_seconds"] = {{"compile", "long"}};
  EXPECT_NE(Record::FromJson(j, "results.jsonl:3").error().message.find("metrics.phase_seconds"), std::string::npos);
}

TEST(Record, AWrongFieldIsNamedWithItsLine) {
  auto j = testing::RecJson("m", "PASS");
  j["metrics"]["wall_time_s"] = "long";
  EXPECT_TRUE(testing::FailsWith(Record::FromJson(j, "r.jsonl:7"), {"r.jsonl:7", "metrics.wall_time_s", "not a number"}));
  j = testing::RecJson("m", "MAYBE");
  EXPECT_TRUE(testing::FailsWith(Record::FromJson(j, "r.jsonl:1"), {"verification_code", "MAYBE"}));
  EXPECT_TRUE(testing::FailsWith(Record::FromJson(nlohmann::json::array(), "r.jsonl:2"), {"r.jsonl:2", "not a JSON object"}));
  j = testing::RecJson("m", "PASS");
  j.erase("fingerprint");
  EXPECT_TRUE(testing::FailsWith(Record::FromJson(j, "r.jsonl:4"), {"fingerprint"}));
  j = testing::RecJson("m", "PASS");
  j["distributed"] = {{"rank", 2}, {"world_size", 2}, {"replay", "real"}};
  EXPECT_TRUE(testing::FailsWith(Record::FromJson(j, "r.jsonl:5"), {"r.jsonl:5", "distributed.rank", "world_size"}));
}

TEST(Record, OneWriterOneReaderStrictOrLenient) {
  testing::TempDir dir;
  const auto file = dir / "results.jsonl";
  ASSERT_TRUE(AppendRecord(file, testing::Rec("a", "PASS")).ok());
  ASSERT_TRUE(AppendRecord(file, testing::Rec("b", "FAIL", "compare")).ok());
  std::ofstream(file, std::ios::app) << R"({"kind": "profile", "profile": {}})" << "\n";  // parity profile's
  auto strict = ReadRecords(file, ReadMode::kStrict);
  ASSERT_TRUE(strict.ok()) << strict.error().message;
  ASSERT_EQ(strict->size(), 2u);
  EXPECT_EQ((*strict)[1].model, "b");
  std::ofstream(file, std::ios::app) << "{\"fingerprint\": \"c\"";  // a line cut by a kill
  EXPECT_TRUE(testing::FailsWith(ReadRecords(file, ReadMode::kStrict), {"results.jsonl:4"}));
  auto lenient = ReadRecords(file, ReadMode::kLenient);
  ASSERT_TRUE(lenient.ok());
  EXPECT_EQ(lenient->size(), 2u);
  EXPECT_EQ(DoneFingerprints(file), (std::set<std::string>{"a-fault", "b-fault"}));
  EXPECT_EQ(ReadProfileRecords(file).size(), 1u);
  EXPECT_TRUE(ReadRecords(dir / "absent.jsonl", ReadMode::kLenient)->empty());
  EXPECT_FALSE(ReadRecords(dir / "absent.jsonl", ReadMode::kStrict).ok());
}

TEST(Record, TheWeakerRuleIsSaid) {
  auto r = testing::Rec("m", "PASS");
  EXPECT_EQ(r.WeakerRuleNote(), "");
  r.fp64_reference = false;
  r.reference_error = "node \"mm\" (aten::_weight_int8pack_mm): expect A to be either 32-bit or 16-bit float tensor";
  EXPECT_NE(r.WeakerRuleNote().find("decided by cosine similarity"), std::string::npos);
  EXPECT_NE(r.WeakerRuleNote().find("_weight_int8pack_mm"), std::string::npos);
  EXPECT_DOUBLE_EQ(r.MaxAbsError(), 1e-8);
}

TEST(Record, MaxAbsErrorSaysWhereAResultWentNonFinite) {
  using nlohmann::json;
  auto out = [](double max_abs, int res_nan, int ref_nan, int res_inf, int ref_inf) {
    return json{{"stats", {{"max_abs_err", max_abs}, {"res_nan", res_nan}, {"ref_nan", ref_nan}, {"res_inf", res_inf}, {"ref_inf", ref_inf}}}};
  };
  EXPECT_DOUBLE_EQ(MaxAbsError(json::array({out(1e-3, 0, 0, 0, 0), out(2e-3, 0, 0, 0, 0)})), 2e-3);
  EXPECT_DOUBLE_EQ(MaxAbsError(json::array({out(1e-3, 2, 2, 1, 1)})), 1e-3);  // the same non-finite values: not an error
  // A result all NaN where eager is finite: its finite differences are none, so max_abs_err is 0.
  EXPECT_TRUE(std::isnan(MaxAbsError(json::array({out(1e-3, 0, 0, 0, 0), out(0, 4, 0, 0, 0)}))));
  EXPECT_TRUE(std::isnan(MaxAbsError(json::array({out(0, 0, 3, 0, 0)}))));  // or the reverse
  EXPECT_EQ(MaxAbsError(json::array({out(1e-3, 0, 0, 1, 0)})), std::numeric_limits<double>::infinity());
  // An output without the counts (not floating) or without statistics says nothing.
  EXPECT_DOUBLE_EQ(MaxAbsError(json::array({json{{"stats", {{"max_abs_err", 0.5}}}}, json{{"path", "x"}}})), 0.5);
  EXPECT_DOUBLE_EQ(MaxAbsError(json::array()), 0.0);
}

}  // namespace
}  // namespace parity::results
