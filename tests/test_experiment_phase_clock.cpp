#include "experiment/phase_clock.h"

#include <gtest/gtest.h>

#include <thread>

namespace parity::experiment {
namespace {

using Clock = PhaseClock::Clock;
using namespace std::chrono_literals;

void Sleep(std::chrono::milliseconds ms) { std::this_thread::sleep_for(ms); }

TEST(PhaseClock, ThePhasesAddUpToTheWallTimeAndTheStepsAreSaid) {
  std::vector<std::string> steps;
  const auto start = Clock::now();
  PhaseClock clock([&](const std::string& s) { steps.push_back(s); }, start);
  clock.Enter("load");
  Sleep(20ms);
  clock.Enter("eager", "eager_2nd_run");
  Sleep(30ms);
  const auto seconds = clock.Seconds();
  const double wall = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_EQ(steps, (std::vector<std::string>{"load", "eager_2nd_run"}));
  ASSERT_EQ(seconds.size(), 2u);
  EXPECT_GE(seconds.at("load"), 0.015);
  EXPECT_GE(seconds.at("eager"), 0.025);
  EXPECT_NEAR(clock.Total(), wall, 0.01);  // the time before the first phase is none of them
}

TEST(PhaseClock, AWaitIsSplitByWhatTheOtherSideHadReached) {
  PhaseClock clock;
  clock.Enter("backend_runs");
  const auto waited = Clock::now();
  Sleep(30ms);
  const auto listening = Clock::now();  // the worker listened 30 ms into the wait
  Sleep(40ms);
  const auto compiled = Clock::now();  // and was done compiling 40 ms later
  Sleep(20ms);
  clock.SplitWait({{waited - 5s, "before the wait"}, {listening, "worker_start"}, {compiled, "compile"}});
  const auto s = clock.Seconds();
  EXPECT_EQ(s.count("before the wait"), 0u);  // a milestone before the wait costs nothing
  EXPECT_NEAR(s.at("worker_start"), 0.030, 0.012);
  EXPECT_NEAR(s.at("compile"), 0.040, 0.012);
  EXPECT_NEAR(s.at("backend_runs"), 0.020, 0.012);
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
