#include <ostream>

#include "minifier/steps/steps.h"
#include "runtime/worker_requests.h"
#include "experiment/backend.h"
#include "experiment/case.h"
#include "experiment/reference.h"

namespace parity::minifier {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// What taking each of the bisector's subsystems away does, in the words of the sentence.
std::string Removing(const std::string& subsystem) {
  if (subsystem == "lowerings") return "falling back to ATen for it";
  if (subsystem == "decomposition") return "not decomposing it";
  if (subsystem == "cudagraphs") return "running it without CUDA graphs";
  if (subsystem.size() > 7 && subsystem.compare(subsystem.size() - 7, 7, "_passes") == 0) return "skipping this pass";
  if (subsystem == "pre_grad_graph") return "leaving the pre-grad graph as it was";
  return "disabling it";
}

// The request for one bisection of the repro dir `dir`'s graph `graph`.
json Request(const ReductionState& state, const std::string& dynamo, const fs::path& dir, const std::string& graph) {
  runtime::requests::CompilerBisect b;
  b.repro = fs::absolute(dir).string();
  b.graph = graph;
  b.backend = dynamo;
  b.options = state.base.backend_options;
  b.mode = state.base.test;
  b.device = state.base.device;
  b.seed = experiment::ReferenceOptions{}.seed;
  b.sgd_lr = experiment::kSgdLr;
  b.tol = experiment::EffectiveTolerance(state.base);
  b.ignore_non_fp = state.base.ignore_non_fp;
  b.signature = state.original.ToJson();
  return runtime::requests::Bisect(b);
}

}  // namespace

std::string CompilerCulpritSentence(const json& c) {
  if (c.contains("none")) return c["none"].get<std::string>();
  if (c.contains("error")) return "the compiler bisection did not finish: " + c["error"].get<std::string>();
  if (!c.contains("backend")) return "no stage of torch.compile fails the same way in the bisector's runs: the failure is not in "
                                     "what PyTorch's compiler bisector knows";
  const std::string backend = c["backend"].get<std::string>();
  if (c.value("subsystem", json()).is_null())
    return "inside " + backend + ", but no subsystem the bisector knows removes the failure alone";
  const std::string subsystem = c["subsystem"].get<std::string>();
  const std::string detail = c.value("detail", json()).is_string() ? c["detail"].get<std::string>() : "";
  const std::string config = c.value("config", json()).is_string() ? c["config"].get<std::string>() : "";
  if (!config.empty() && c.value("bisect_number", 0) == 0)  // a config toggle
    return "inside " + backend + ": " + subsystem + ": setting " + config + " removes the failure";
  std::string s = "inside " + backend + ": " + subsystem + " #" + std::to_string(c.value("bisect_number", 0));
  if (!detail.empty()) s += " (" + detail + ")";
  s += ": " + Removing(subsystem) + " removes the failure";
  if (!config.empty()) s += " (" + config + ")";
  return s;
}

Status CompilerBisect(StepContext& ctx, ReductionState& state) {
  auto info = experiment::FindBackend(state.base.backend);
  const bool compiles = info.ok() && !info->dynamo.empty() && info->kind.find("python worker") != std::string::npos;
  auto finish = [&](json culprit) {
    culprit["sentence"] = CompilerCulpritSentence(culprit);
    ctx.log << "compiler culprit: " << culprit["sentence"].get<std::string>() << "\n";
    state.compiler_culprit = std::move(culprit);
    return Status::Ok();
  };
  if (!compiles)
    return finish({{"none", state.base.backend + " is no torch.compile backend: it has no compiler subsystems PyTorch's "
                                                 "bisector knows"}});
  if (!ctx.ask || !ctx.write_graph) return finish({{"none", "not bisected: no Python worker to bisect in"}});
  const GraphEntry& entry = ctx.repro.graphs()[state.graph_index];
  // The minified graph first (each try compiles only it); the original graph when the minified
  // one passes every stage (the cut left the compiler's part out).
  const fs::path minified = ctx.scratch / "bisect-minified";
  PARITY_RETURN_IF_ERROR(ctx.write_graph(*state.current, minified));
  json answer;
  int runs = 0;
  double seconds = 0.0;
  for (const auto& [on, dir, graph] : {std::tuple<std::string, fs::path, std::string>{"minified", minified, entry.name},
                                       {"original", fs::path(state.source), entry.name}}) {
    ctx.log << "compiler bisection on the " << on << " graph ...\n";
    auto r = ctx.ask(Request(state, info->dynamo, dir, graph));
    if (!r.ok()) return finish({{"error", r.error().message}, {"on", on}});
    answer = *r;
    runs += answer.value("runs", 0);
    seconds += answer.value("seconds", 0.0);
    if (!answer.value("bisected", false)) return finish({{"none", "not bisected: " + answer.value("why", std::string("?"))}});
    if (!answer["result"].is_null()) {
      json culprit = answer["result"];
      culprit["on"] = on;
      culprit["runs"] = runs;
      culprit["seconds"] = seconds;
      return finish(std::move(culprit));
    }
  }
  return finish({{"runs", runs}, {"seconds", seconds}});
}

}  // namespace parity::minifier
