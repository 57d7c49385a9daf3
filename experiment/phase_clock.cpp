#include "experiment/phase_clock.h"

#include <algorithm>

namespace parity::experiment {

namespace {
double Between(PhaseClock::Clock::time_point a, PhaseClock::Clock::time_point b) {
  return b > a ? std::chrono::duration<double>(b - a).count() : 0.0;
}
}  // namespace

PhaseClock::PhaseClock(OnStep on_step, Clock::time_point start) : on_step_(std::move(on_step)), since_(start) {}

void PhaseClock::Close(Clock::time_point now) {
  if (!bucket_.empty()) seconds_[bucket_] += Between(since_, now);
  since_ = now;
}

void PhaseClock::Enter(const std::string& bucket, const std::string& step) {
  Close(Clock::now());
  bucket_ = bucket;
  if (on_step_) on_step_(step.empty() ? bucket : step);
}

void PhaseClock::SplitWait(const std::vector<std::pair<Clock::time_point, std::string>>& milestones) {
  const auto now = Clock::now();
  Clock::time_point at = since_;
  for (const auto& [until, bucket] : milestones) {
    const Clock::time_point end = std::min(until, now);
    if (end <= at) continue;
    seconds_[bucket] += Between(at, end);
    at = end;
  }
  since_ = at;  // the rest of the wait is the current bucket's
  Close(now);
}

std::map<std::string, double> PhaseClock::Seconds() {
  Close(Clock::now());
  std::map<std::string, double> out;
  for (const auto& [k, v] : seconds_)
    if (v > 0) out[k] = v;
  return out;
}

double PhaseClock::Total() {
  double t = 0;
  for (const auto& [k, v] : Seconds()) t += v;
  return t;
}

}  // namespace parity::experiment
