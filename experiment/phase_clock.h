// Where an experiment's time goes: its wall time partitioned into the phases it waited on
// (results::kPhases names them), so that the parts add up to the whole. The flow enters a phase
// as it starts one step (and says the step's name to whoever watches: status.txt, the console);
// work that ran beside the flow (the backend's compile in the worker while the reference ran)
// costs only the part of it the flow waited for, split by the milestones the other side reached
// (SplitWait). Pure bookkeeping: knows nothing of experiments.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace parity::experiment {

class PhaseClock {
 public:
  using Clock = std::chrono::steady_clock;
  using OnStep = std::function<void(const std::string& step)>;

  explicit PhaseClock(OnStep on_step = nullptr, Clock::time_point start = Clock::now());

  // From now on the time is `bucket`'s; `step` (default: the bucket) is what the flow is doing,
  // said to on_step.
  void Enter(const std::string& bucket, const std::string& step = "");
  // The wait that started when `bucket` was entered and ends now, split by what the work waited
  // for had reached: until milestones[0].first the wait is milestones[0].second's, and so on;
  // after the last milestone it stays `bucket`'s. Milestones in time order; ones before the wait
  // began cost nothing.
  void SplitWait(const std::vector<std::pair<Clock::time_point, std::string>>& milestones);
  // Closes the current phase at now and returns every bucket's seconds (buckets with none left
  // out); the clock goes on in the same phase.
  std::map<std::string, double> Seconds();
  double Total();  // the sum of Seconds(): the wall time since the start

 private:
  void Close(Clock::time_point now);
  OnStep on_step_;
  std::string bucket_;
  Clock::time_point since_;
  std::map<std::string, double> seconds_;
};

}  // namespace parity::experiment
