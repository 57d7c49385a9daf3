#include "experiment/phase_clock.h"

#include <gtest/gtest.h>

#include <thread>

namespace parity::experiment {
namespace {

using Clock = PhaseClock::Clock;
using namespace std::chrono_literals;

void Sleep(std::chrono::milliseconds ms) { std::this_thread::sleep_for(ms); }
double Secs(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

TEST(PhaseClock, ThePhasesAddUpToTheWallTimeAndTheStepsAreSaid) {
  std::vector<std::string> steps;
  const auto start = Clock::now();
  PhaseClock clock([&](const std::string& s) { steps.push_back(s); }, start);
  clock.Enter("load");
  const auto first = Clock::now();  // the first phase began at or before this
  Sleep(20ms);
  clock.Enter("eager", "eager_2nd_run");
  Sleep(30ms);
  const auto before = Clock::now();
  const auto seconds = clock.Seconds();
  EXPECT_EQ(steps, (std::vector<std::string>{"load", "eager_2nd_run"}));
  ASSERT_EQ(seconds.size(), 2u);
  EXPECT_GE(seconds.at("load"), 0.015);
  EXPECT_GE(seconds.at("eager"), 0.025);
  // The time before the first phase is none of them: the total is the wall time since `start`,
  // bounded by the moments around it (no tolerance a busy machine's preemption could break).
  const double total = clock.Total();
  const auto after = Clock::now();
  EXPECT_GE(total, Secs(before - first) - 1e-6);
  EXPECT_LE(total, Secs(after - start));
}

TEST(PhaseClock, AWaitIsSplitByWhatTheOtherSideHadReached) {
  PhaseClock clock;
  const auto entering = Clock::now();
  clock.Enter("backend_runs");
  const auto waited = Clock::now();
  Sleep(30ms);
  const auto listening = Clock::now();  // the worker listened 30 ms into the wait
  Sleep(40ms);
  const auto compiled = Clock::now();  // and was done compiling 40 ms later
  Sleep(20ms);
  const auto splitting = Clock::now();
  clock.SplitWait({{waited - 5s, "before the wait"}, {listening, "worker_start"}, {compiled, "compile"}});
  const auto s = clock.Seconds();
  const auto split = Clock::now();
  EXPECT_EQ(s.count("before the wait"), 0u);  // a milestone before the wait costs nothing
  // Each part is the interval between the moments it is split at, whatever the sleeps took.
  EXPECT_GE(s.at("worker_start"), Secs(listening - waited) - 1e-6);
  EXPECT_LE(s.at("worker_start"), Secs(listening - entering) + 1e-6);
  EXPECT_NEAR(s.at("compile"), Secs(compiled - listening), 1e-6);
  EXPECT_GE(s.at("backend_runs"), Secs(splitting - compiled) - 1e-6);
  EXPECT_LE(s.at("backend_runs"), Secs(split - compiled) + 1e-6);
  Sleep(10ms);  // after the split the clock goes on in the phase entered
  EXPECT_GT(clock.Seconds().at("backend_runs"), s.at("backend_runs"));
}

TEST(PhaseClock, AWaitWhoseWorkWasDoneBeforeItCostsOnlyItself) {
  PhaseClock clock;
  const auto long_ago = Clock::now();
  Sleep(10ms);
  clock.Enter("backend_runs");
  Sleep(10ms);
  clock.SplitWait({{long_ago, "worker_start"}, {long_ago, "compile"}});
  const auto s = clock.Seconds();
  EXPECT_EQ(s.size(), 1u);
  EXPECT_GT(s.at("backend_runs"), 0.005);
}

}  // namespace
}  // namespace parity::experiment
