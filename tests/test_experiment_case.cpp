#include "experiment/case.h"

#include <gtest/gtest.h>

#include "test_helpers.h"
#include "util/files.h"

namespace parity::experiment {
namespace {

namespace fs = std::filesystem;

// The small repro with a manifest rewritten by `edit`.
ReproDir SmallRepro(const testing::TempDir& dir, const std::function<void(Manifest&)>& edit) {
  testing::WriteSmallRepro(dir.path());
  auto r = ReproDir::Load(dir.path());
  EXPECT_TRUE(r.ok()) << r.error().message;
  Manifest m = r->manifest();
  edit(m);
  std::vector<const GraphEntry*> gs;
  for (const auto& g : r->graphs()) gs.push_back(&g);
  EXPECT_TRUE(WriteFileAtomic(dir / "manifest.json", ManifestToJson(m, gs).dump(2)).ok());
  return ReproDir::Load(dir.path()).value();
}

TEST(Case, FromReproTakesTheManifest) {
  testing::TempDir dir;
  ReproDir r = SmallRepro(dir, [](Manifest& m) {
    m.suite = "huggingface";
    m.mode = "train";
    m.dtype = "bfloat16";
    m.device = "cuda";
    m.backend = "inductor";
    m.backend_options = {{"max_autotune", "True"}};
    m.failure = {{"tol", 0.02}};
  });
  auto s = Case::FromRepro(r, std::nullopt, ExperimentOptions{});
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->suite, "huggingface");
  EXPECT_EQ(s->test, "train");
  EXPECT_EQ(s->dtype, "bfloat16");
  EXPECT_EQ(s->device, "cuda");
  EXPECT_EQ(s->backend, "inductor");
  EXPECT_EQ(s->backend_options["max_autotune"], "True");
  EXPECT_DOUBLE_EQ(*s->tol, 0.02);  // the tolerance the failure was judged at
  EXPECT_EQ(s->repro, fs::absolute(dir.path()).string());
  EXPECT_FALSE(s->cache_dir.empty());
}

TEST(Case, FromReproOverrides) {
  testing::TempDir dir;
  ReproDir r = SmallRepro(dir, [](Manifest& m) {
    m.backend = "inductor";
    m.backend_options = {{"cpp.inject_relu_bug_TESTING_ONLY", "accuracy"}};
    m.failure = {{"tol", 0.02}};
  });
  ExperimentOptions o;
  o.device = "cpu";
  o.tol = 1e-3;
  auto s = Case::FromRepro(r, "aot_eager", o);  // another backend: the manifest's options are not its options
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->backend, "aot_eager");
  EXPECT_TRUE(s->backend_options.empty());
  EXPECT_DOUBLE_EQ(*s->tol, 1e-3);
  s = Case::FromRepro(r, "inductor", ExperimentOptions{});  // its own backend: its own options
  EXPECT_EQ(s->backend_options, (nlohmann::json{{"cpp.inject_relu_bug_TESTING_ONLY", "accuracy"}}));
  o.backend_options = nlohmann::json{{"max_autotune", "True"}};
  s = Case::FromRepro(r, "inductor", o);
  EXPECT_EQ(s->backend_options, (nlohmann::json{{"max_autotune", "True"}}));
  // Options scoped to another backend are not this one's: the dir's own stay.
  o.backend_options = nlohmann::json{{"fault:op", "aten::relu"}};
  s = Case::FromRepro(r, "inductor", o);
  EXPECT_EQ(s->backend_options, (nlohmann::json{{"cpp.inject_relu_bug_TESTING_ONLY", "accuracy"}}));
  s = Case::FromRepro(r, "fault", o);
  EXPECT_EQ(s->backend_options, (nlohmann::json{{"op", "aten::relu"}}));
}

TEST(Case, AnAutocastCaptureIsAmp) {
  testing::TempDir dir;
  ReproDir r = SmallRepro(dir, [](Manifest& m) {
    m.backend = "eager";
    m.extra["amp"] = "bfloat16";
  });
  auto s = Case::FromRepro(r, std::nullopt, ExperimentOptions{});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->dtype, "amp");
  EXPECT_DOUBLE_EQ(EffectiveTolerance(*s), 1e-3);
  EXPECT_EQ(r.graphs()[0].amp, "bfloat16");  // its graphs ran under it too
}

TEST(Case, ARankOfAMultiRankDirNamesItsRank) {
  testing::TempDir dir;
  ReproDir r = SmallRepro(dir, [](Manifest& m) {
    m.model = "ddp";
    m.backend = "eager";
    m.extra["distributed"] = {{"rank", 1}, {"world_size", 2}, {"process_groups", nlohmann::json::object()}};
  });
  auto s = Case::FromRepro(r, std::nullopt, ExperimentOptions{});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->model, "ddp.rank1");
  EXPECT_EQ(s->rank, 1);
  EXPECT_EQ(s->world_size, 2);
  // Through the experiment's child and back; rank 0 of the same world is another experiment.
  auto back = ExperimentSpec::FromJson(s->ToJson());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->rank, 1);
  EXPECT_EQ(back->world_size, 2);
  ExperimentSpec rank0 = *s;
  rank0.rank = 0;
  EXPECT_NE(rank0.Fingerprint(), s->Fingerprint());
  // A plain dir's spec says nothing of ranks: earlier runs' fingerprints hold.
  ReproDir plain = SmallRepro(dir, [](Manifest& m) { m.backend = "eager"; });
  auto p = Case::FromRepro(plain, std::nullopt, ExperimentOptions{});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->rank, -1);
  EXPECT_FALSE(p->ToJson().contains("distributed"));
}

TEST(Case, FromReproWithoutABackendIsBadInput) {
  testing::TempDir dir;
  ReproDir r = SmallRepro(dir, [](Manifest& m) { m.backend.reset(); });
  auto s = Case::FromRepro(r, std::nullopt, ExperimentOptions{});
  EXPECT_TRUE(testing::FailsWith(s, {"manifest.json", "names no backend", "--backend"}));
  EXPECT_EQ(s.error().kind, ErrorKind::kBadInput);
}

TEST(Case, SuiteFieldDefaultsToRepro) {
  testing::TempDir dir;
  ReproDir r = SmallRepro(dir, [](Manifest&) {});
  EXPECT_EQ(r.manifest().suite, "repro");
  auto s = Case::FromRepro(r, "eager", ExperimentOptions{});
  ASSERT_TRUE(s.ok());
  EXPECT_DOUBLE_EQ(EffectiveTolerance(*s), 1e-4);  // torchbench's default
}

TEST(Case, FromSuite) {
  ExperimentOptions o;
  o.batch_size = 4;
  o.tol = 1e-2;
  ExperimentSpec s = Case::FromSuite("llama", "huggingface", "train", "float32", "inductor", o);
  EXPECT_EQ(s.backend, "inductor");
  EXPECT_EQ(s.model, "llama");
  EXPECT_EQ(s.suite, "huggingface");
  EXPECT_EQ(s.test, "train");
  EXPECT_EQ(s.device, "cpu");
  EXPECT_EQ(s.batch_size, 4);
  EXPECT_TRUE(s.repro.empty());  // captured when it runs
  EXPECT_DOUBLE_EQ(EffectiveTolerance(s), 1e-2);
  o.backend_options = nlohmann::json{{"max_autotune", "True"}, {"fault:op", "aten::relu"}};
  EXPECT_EQ(Case::FromSuite("llama", "huggingface", "train", "float32", "inductor", o).backend_options,
            (nlohmann::json{{"max_autotune", "True"}}));
  EXPECT_EQ(Case::FromSuite("llama", "huggingface", "train", "float32", "fault", o).backend_options,
            (nlohmann::json{{"max_autotune", "True"}, {"op", "aten::relu"}}));
}

TEST(Case, DefaultTolerancesFollowPyTorchSuites) {
  EXPECT_DOUBLE_EQ(DefaultTolerance("huggingface", "eval", "float32"), 1e-3);
  EXPECT_DOUBLE_EQ(DefaultTolerance("huggingface", "train", "float32"), 1e-2);
  EXPECT_DOUBLE_EQ(DefaultTolerance("torchvision-style", "eval", "float32"), 1e-3);
  EXPECT_DOUBLE_EQ(DefaultTolerance("toy", "eval", "float32"), 1e-4);
  EXPECT_DOUBLE_EQ(DefaultTolerance("toy", "train", "float32"), 1e-3);
  EXPECT_DOUBLE_EQ(DefaultTolerance("toy", "eval", "bfloat16"), 1e-3);
}

}  // namespace
}  // namespace parity::experiment
