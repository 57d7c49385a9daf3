#include "profile/breakdown.h"

#include <gtest/gtest.h>

#include <cmath>

namespace parity::profile {
namespace {

using nlohmann::json;

// What tools/parity_capture/profiling/ reports, made by hand.
json Child(const std::string& device = "cpu") {
  json rows = json::array({{{"name", "graph_0_cpp_fused_gelu_0"},
                            {"time_us", 30.0},
                            {"calls", 4.0},
                            {"category", "pointwise"},
                            {"kernel", "cpp_fused_gelu_0"},
                            {"nodes", {"gelu", "gelu_1"}},
                            {"device_kernels", json::array()}},
                           {{"name", "aten::addmm"},
                            {"time_us", 50.0},
                            {"calls", 5.0},
                            {"category", "extern"},
                            {"kernel", "aten::addmm"},
                            {"nodes", {"linear"}}},
                           {{"name", "cpp_fused_sum_1"},
                            {"time_us", 15.0},
                            {"calls", 1.0},
                            {"category", "reduction"},
                            {"kernel", "cpp_fused_sum_1"},
                            {"nodes", {"sum_1"}}},
                           {{"name", "Torch-Compiled Region: 0/0"},
                            {"time_us", 5.0},
                            {"calls", 1.0},
                            {"category", "other"},
                            {"kernel", nullptr},
                            {"nodes", json::array()}}});
  return {{"device", device},
          {"device_name", "test"},
          {"torch_version", "2.x"},
          {"provenance", true},
          {"eager", {{"times_ms", {0.3, 0.2, 0.25, 0.4}}, {"peak_mem_bytes", 2e6}}},
          {"backend", {{"times_ms", {0.1, 0.1, 0.12, 0.08}}, {"compile_s", 3.5}, {"peak_mem_bytes", 1e6}}},
          {"profile", {{"rows", rows}, {"wall_ms", 0.15}, {"device_busy_us", device == "cpu" ? json() : json(80.0)}}},
          {"eager_profile",
           {{"rows", json::array({{{"name", "aten::addmm"}, {"time_us", 60.0}, {"calls", 5.0}}})}, {"wall_ms", 0.4}}}};
}

TEST(Breakdown, SharesOfKernelsAndCategoriesSumToOne) {
  auto r = ReportOf(Child(), nullptr);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const Breakdown& b = r->compiled;
  EXPECT_DOUBLE_EQ(b.total_us, 100.0);
  double kernels = 0, cats = 0;
  for (const auto& k : b.rows) kernels += k.share;
  for (const auto& c : b.categories) cats += c.share;
  EXPECT_NEAR(kernels, 1.0, 1e-12);
  EXPECT_NEAR(cats, 1.0, 1e-12);
  // Largest first; categories in report order, each with its kernels counted.
  EXPECT_EQ(b.rows.front().name, "aten::addmm");
  ASSERT_EQ(b.categories.size(), 4u);
  EXPECT_EQ(b.categories[0].category, "pointwise");
  EXPECT_EQ(b.categories[1].category, "reduction");
  EXPECT_EQ(b.categories[2].category, "extern");
  EXPECT_EQ(b.categories[3].category, "other");
  EXPECT_EQ(b.categories[3].kernels, 0);
  EXPECT_DOUBLE_EQ(b.categories[2].share, 0.5);
}

TEST(Breakdown, SpeedIsMediansWithSpreadAsTheRunnerReportsIt) {
  auto r = ReportOf(Child(), nullptr);
  ASSERT_TRUE(r.ok());
  const Speed& s = r->speed;
  EXPECT_DOUBLE_EQ(s.eager.median_ms, 0.275);
  EXPECT_DOUBLE_EQ(s.backend.median_ms, 0.1);
  EXPECT_DOUBLE_EQ(s.backend.min_ms, 0.08);
  EXPECT_EQ(s.backend.samples, 4);
  EXPECT_NEAR(s.speedup, 2.75, 1e-12);
  ASSERT_TRUE(s.compression_ratio.has_value());
  EXPECT_DOUBLE_EQ(*s.compression_ratio, 2.0);
  // Profiling overhead: the profiled iteration against the unprofiled median.
  EXPECT_NEAR(r->compiled.overhead_percent, 50.0, 1e-9);
  EXPECT_FALSE(r->compiled.busy_percent.has_value());  // only on a GPU
}

TEST(Breakdown, BusyPercentIsDeviceTimeOverTheUnprofiledIteration) {
  auto r = ReportOf(Child("cuda"), nullptr);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->compiled.busy_percent.has_value());
  EXPECT_NEAR(*r->compiled.busy_percent, 80.0, 1e-9);  // 80 us of 0.1 ms
}

TEST(Breakdown, NoCompressionRatioWithoutBothPeaks) {
  json c = Child();
  c["backend"]["peak_mem_bytes"] = 0;
  auto r = ReportOf(c, nullptr);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->speed.compression_ratio.has_value());
  EXPECT_EQ(PerformanceCsvRow(*r)[6], "0");
}

TEST(Breakdown, AMalformedChildResultIsAnInternalError) {
  json c = Child();
  c.erase("backend");
  auto r = ReportOf(c, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ErrorKind::kInternal);
  c = Child();
  c["eager"]["times_ms"] = json::array();
  EXPECT_FALSE(ReportOf(c, nullptr).ok());
}

TEST(Breakdown, SourceLineIsTheInnermostFrameOutsideTorch) {
  ir::Graph g("g");
  ir::Node* n = g.Append(ir::NodeKind::kCallFunction, "linear", "aten::linear");
  n->stack_trace =
      "File \"/home/u/model.py\", line 40, in forward\n    x = self.proj(x)\n"
      "  File \"/venv/site-packages/torch/nn/modules/linear.py\", line 134, in forward\n    return F.linear(input, self.weight)";
  g.Append(ir::NodeKind::kCallFunction, "plain", "aten::relu");
  ir::Node* gen = g.Append(ir::NodeKind::kCallFunction, "generated", "aten::mm");
  gen->stack_trace = "File \"<eval_with_key>.42\", line 13, in forward\n    matmul = torch.ops.aten.matmul.default(a, b)";
  EXPECT_EQ(SourceLineOf({"missing", "plain", "linear"}, g), "model.py:40 x = self.proj(x)");
  EXPECT_EQ(SourceLineOf({"plain"}, g), "");
  EXPECT_EQ(SourceLineOf({"generated"}, g), "");  // an FX module's generated forward is no model line
  auto r = ReportOf(Child(), &g);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->compiled.rows.front().source, "model.py:40 x = self.proj(x)");  // aten::addmm computes linear
}

TEST(Breakdown, PerformanceCsvHasTheRunnersColumns) {
  auto r = ReportOf(Child(), nullptr);
  ASSERT_TRUE(r.ok());
  r->model = "mlp";
  r->batch_size = 8;
  ASSERT_EQ(PerformanceCsvHeader().size(), 9u);
  EXPECT_EQ(PerformanceCsvHeader().front(), "dev");
  EXPECT_EQ(PerformanceCsvHeader().back(), "dynamo_peak_mem");
  const auto row = PerformanceCsvRow(*r);
  ASSERT_EQ(row.size(), 9u);
  EXPECT_EQ(row[0], "cpu");
  EXPECT_EQ(row[1], "mlp");
  EXPECT_EQ(row[2], "8");
  EXPECT_EQ(row[3], "2.750000");
  EXPECT_EQ(row[4], "0.100000");  // abs_latency: ms
  EXPECT_EQ(row[5], "3.500000");  // compilation_latency: s
  EXPECT_EQ(row[7], "0.002000");  // peak memory: GB
}

TEST(Breakdown, TextAndJsonCarryTheTables) {
  auto r = ReportOf(Child("cuda"), nullptr);
  ASSERT_TRUE(r.ok());
  r->model = "mlp";
  r->backend = "inductor";
  const std::string text = ReportText(*r, 2);
  EXPECT_NE(text.find("speedup 2.75x"), std::string::npos) << text;
  EXPECT_NE(text.find("busy 80.0%"), std::string::npos) << text;
  EXPECT_NE(text.find("top 2 of 4"), std::string::npos) << text;
  EXPECT_EQ(text.find("Torch-Compiled Region"), std::string::npos) << text;  // below the top 2
  const json j = r->ToJson();
  EXPECT_EQ(j["breakdown"]["rows"].size(), 4u);
  EXPECT_EQ(j["breakdown"]["categories"][0]["category"], "pointwise");
  EXPECT_EQ(j["speed"]["backend"]["median_ms"], 0.1);
  EXPECT_EQ(j["eager_breakdown"]["rows"][0]["name"], "aten::addmm");
}

TEST(Breakdown, BackwardRowsKeepTheirPhase) {
  json child = Child();
  child["profile"]["rows"][0]["phase"] = "backward";  // a train step's backward kernel
  child["profile"]["rows"][1]["phase"] = "sideways";  // anything else is the forward
  auto r = ReportOf(child, nullptr);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const KernelRow* bwd = nullptr;
  for (const auto& k : r->compiled.rows)
    if (k.name == "graph_0_cpp_fused_gelu_0") bwd = &k;
  ASSERT_NE(bwd, nullptr);
  EXPECT_EQ(bwd->phase, "backward");
  for (const auto& k : r->compiled.rows) {
    if (&k == bwd) continue;
    EXPECT_EQ(k.phase, "forward") << k.name;
  }
  EXPECT_NE(ReportText(*r, 4).find("bwd graph_0_cpp_fused_gelu_0"), std::string::npos);
  EXPECT_EQ(r->ToJson()["breakdown"]["rows"][1]["phase"], "backward");  // 30 us: second by time
}

}  // namespace
}  // namespace parity::profile
