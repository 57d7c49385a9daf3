#include "experiment/calibration.h"

#include <ATen/ops/allclose.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/full_like.h>
#include <ATen/ops/linspace.h>
#include <ATen/ops/nextafter.h>
#include <ATen/ops/randn.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include "test_helpers.h"

namespace parity::experiment {
namespace {

TEST(Calibration, UlpPerturbedMovesEveryElementByOneUlp) {
  for (c10::ScalarType dt : {at::kFloat, at::kBFloat16, at::kHalf, at::kDouble}) {
    const at::Tensor x = at::linspace(-3, 3, 64, at::kDouble).to(dt);
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(1);
    const at::Tensor y = UlpPerturbed(x, gen);
    ASSERT_EQ(y.scalar_type(), dt);
    const double inf = std::numeric_limits<double>::infinity();
    const at::Tensor up = at::nextafter(x, at::full_like(x, inf)), down = at::nextafter(x, at::full_like(x, -inf));
    EXPECT_TRUE(y.eq(up).logical_or(y.eq(down)).all().item<bool>()) << dt;
    EXPECT_TRUE(y.ne(x).all().item<bool>()) << dt;
    EXPECT_GT(y.gt(x).sum().item<int64_t>(), 10) << dt;  // both directions drawn
    EXPECT_GT(y.lt(x).sum().item<int64_t>(), 10) << dt;
  }
}

TEST(Calibration, UlpPerturbedIsReproducibleBySeedAndLeavesIntegersAlone) {
  const at::Tensor x = at::randn({100});
  at::Generator a = at::make_generator<at::CPUGeneratorImpl>(7), b = at::make_generator<at::CPUGeneratorImpl>(7),
                c = at::make_generator<at::CPUGeneratorImpl>(8);
  EXPECT_TRUE(at::equal(UlpPerturbed(x, a), UlpPerturbed(x, b)));
  EXPECT_FALSE(at::equal(UlpPerturbed(x, a), UlpPerturbed(x, c)));
  const at::Tensor ids = at::arange(5);
  EXPECT_TRUE(at::equal(UlpPerturbed(ids, a), ids));
}

TEST(Calibration, ThreadRunUsesAnotherCount) {
  EXPECT_EQ(OtherThreadCount(4), 1);
  EXPECT_EQ(OtherThreadCount(1), 2);
}

TEST(Calibration, RunsAreTheUlpSeedsThenTheThreadRun) {
  testing::TempDir tmp;
  testing::WriteSmallRepro(tmp.path());
  auto repro = ReproDir::Load(tmp.path());
  ASSERT_TRUE(repro.ok()) << repro.error().message;
  const GraphEntry& g = repro->graphs().at(0);
  auto program = interp::Program::Compile(g.graph, "small");
  ASSERT_TRUE(program.ok());
  auto eager = RunReference(*program, *repro, g, "eval", {});
  auto runs = CalibrationRuns(*program, *repro, g, "eval", {});
  ASSERT_TRUE(runs.ok()) << runs.error().message;
  ASSERT_EQ(runs->size(), static_cast<size_t>(kUlpSeeds + 1));
  EXPECT_EQ((*runs)[0].label, "ulp seed 1");
  EXPECT_EQ(runs->back().label, "threads " + std::to_string(OtherThreadCount(at::get_num_threads())));
  // A ulp run moves the results off eager's, by rounding only; the thread run keeps the inputs.
  const at::Tensor y = eager->at(0).second, moved = (*runs)[0].results.at(0).second;
  EXPECT_FALSE(at::equal(y, moved));
  EXPECT_TRUE(at::allclose(y, moved, 1e-5, 1e-6));
  EXPECT_TRUE(at::allclose(y, runs->back().results.at(0).second, 1e-6, 1e-7));
}

}  // namespace
}  // namespace parity::experiment
