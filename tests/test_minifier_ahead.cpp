// AheadRunner: results made ahead answer the same experiment once, in the order asked; the rest
// run in one batch of the wrapped runner; what no step asked for is counted when dropped.
#include "minifier/ahead.h"

#include <gtest/gtest.h>

namespace parity::minifier {
namespace {

using experiment::Code;
using experiment::ExperimentBatch;
using experiment::ExperimentResult;
using experiment::ExperimentSpec;

// Answers each experiment with its error set to "<dir>#<n>" (n: the inner runner's count).
class CountingRunner final : public experiment::ExperimentRunner {
 public:
  std::vector<size_t> batch_sizes;
  int ran = 0;
  std::vector<ExperimentResult> RunMany(ExperimentBatch batch) override {
    batch_sizes.push_back(batch.size());
    std::vector<ExperimentResult> out;
    for (const auto& [spec, dir] : batch) {
      ExperimentResult r;
      r.code = Code::kFail;
      r.error = dir.string() + "#" + std::to_string(ran++);
      out.push_back(r);
    }
    return out;
  }
  int jobs() const override { return 3; }
};

std::pair<ExperimentSpec, std::filesystem::path> Job(const std::string& backend, const std::string& dir) {
  ExperimentSpec s;
  s.backend = backend;
  s.repro = "/r";
  return {s, dir};
}

TEST(AheadRunner, AnswersTheSameExperimentOnceFromWhatRanAhead) {
  CountingRunner inner;
  AheadRunner ahead(inner);
  EXPECT_EQ(ahead.jobs(), 3);
  ahead.RunAhead({Job("inductor", "scan"), Job("inductor", "c0"), Job("inductor", "c1")});
  EXPECT_TRUE(ahead.Has(Job("inductor", "c0").first, "c0"));
  EXPECT_FALSE(ahead.Has(Job("aot_eager", "c0").first, "c0"));  // another spec, the same dir: another experiment
  const auto r = ahead.RunMany({Job("inductor", "c1"), Job("eager", "x"), Job("inductor", "c0"), Job("eager", "y")});
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(r[0].error, "c1#2");
  EXPECT_EQ(r[1].error, "x#3");  // the rest in one batch of the inner runner
  EXPECT_EQ(r[2].error, "c0#1");
  EXPECT_EQ(r[3].error, "y#4");
  EXPECT_EQ(inner.batch_sizes, (std::vector<size_t>{3, 2}));
  // Taken: asking again runs it again.
  EXPECT_EQ(ahead.RunMany({Job("inductor", "c0")})[0].error, "c0#5");
  EXPECT_EQ(ahead.DropUnused(), 1);  // the scan's
  EXPECT_EQ(ahead.DropUnused(), 0);
  EXPECT_EQ(ahead.RunMany({Job("inductor", "scan")})[0].error, "scan#6");
}

}  // namespace
}  // namespace parity::minifier
