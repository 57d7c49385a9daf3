#include <map>
#include <ostream>

#include "minifier/steps/steps.h"

namespace parity::minifier {
namespace fs = std::filesystem;

namespace {

Status ConfirmWithCheck(StepContext& ctx, ReductionState& state) {
  const bool ok = ctx.check({fs::path(state.source)})[0];
  ++state.backend_runs;
  if (!ok) return Error::Runtime("the --check command does not find the original interesting; nothing to minify");
  state.original.kind = FailureKind::kAccuracy;  // the check command is the oracle; kind is nominal
  state.original.message = "--check " + ctx.options.check_command;
  state.confirm = {{"runs", 1}, {"failing", 1}};
  ctx.log << "original is interesting to --check\n";
  return Status::Ok();
}

}  // namespace

experiment::ExperimentBatch ConfirmBatch(const StepContext& ctx, const ReductionState& state) {
  experiment::ExperimentBatch batch;
  for (int i = 0; i < std::max(1, ctx.options.confirm_runs); ++i) {
    auto s = state.base;
    s.repro = state.source;
    batch.emplace_back(s, ctx.scratch / ("confirm" + std::to_string(i)));
  }
  return batch;
}

Status Confirm(StepContext& ctx, ReductionState& state) {
  if (ctx.check) return ConfirmWithCheck(ctx, state);
  const auto results = ctx.runner.RunMany(ConfirmBatch(ctx, state));
  const int runs = static_cast<int>(results.size());
  state.backend_runs += runs;
  std::map<std::string, std::pair<int, Signature>> seen;  // signature -> (count, signature)
  int failing = 0;
  for (const auto& r : results) {
    Signature s = Signature::FromResult(r);
    if (s.kind == FailureKind::kNone) continue;
    ++failing;
    auto& slot = seen[s.ToJson().dump()];
    slot.first++;
    slot.second = s;
  }
  state.confirm = {{"runs", runs}, {"failing", failing}};
  if (failing == 0) {
    const std::string why = results.empty() ? "" : std::string(experiment::ToString(results[0].code)) + " " + results[0].error;
    Error e = Error::Runtime("the original does not fail with backend " + state.base.backend + " (" + std::to_string(runs) +
                             " runs; first: " + why + "); nothing to minify");
    e.exception_type = kDoesNotFail;
    return e;
  }
  int best = 0;
  for (const auto& [key, v] : seen)
    if (v.first > best) {
      best = v.first;
      state.original = v.second;
    }
  if (best < runs) {
    const std::string rate = std::to_string(best) + "/" + std::to_string(runs);
    std::string others;  // what the other runs showed, so the nondeterminism has a name
    for (const auto& r : results)
      if (Signature::FromResult(r).ToJson() != state.original.ToJson())
        others += (others.empty() ? "" : "; ") + std::string(experiment::ToString(r.code)) +
                  (r.error.empty() ? "" : " " + r.error.substr(0, 200));
    if (!ctx.options.majority || best * 2 <= runs)
      return Error::Runtime("the original fails only sometimes (" + rate + " runs show " + state.original.Describe() +
                            "; the others: " + others + "); rerun with --majority to reduce by majority vote, or fix the nondeterminism");
    ctx.log << "flaky original: " << rate << " runs fail; reducing by majority vote\n";
  }
  ctx.log << "original fails: " << state.original.Describe() << " (" << best << "/" << runs << " runs)\n";
  return Status::Ok();
}

}  // namespace parity::minifier
