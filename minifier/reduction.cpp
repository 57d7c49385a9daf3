#include "minifier/reduction.h"

#include "util/files.h"

namespace parity::minifier {

nlohmann::json NodeInfo(const ir::Node* n) {
  return {{"node", n->name()}, {"target", n->target()}, {"module_path", n->module_path}, {"stack_trace", n->stack_trace}};
}

std::string SourceLine(const ir::Node& n) {
  if (std::string line = ir::ModelLine(n.stack_trace); !line.empty()) return line;
  return n.stack_trace.substr(0, n.stack_trace.find('\n'));
}

nlohmann::json ReductionState::ToJson() const {
  return {{"source", source},
          {"backend", base.backend},
          {"signature", original.ToJson()},
          {"confirm", confirm},
          {"stages", stages},
          {"first_failing_stage", first_failing_stage},
          {"graph_index", graph_index},
          {"culprit", culprit},
          {"passes", passes},
          {"localization", localization},
          {"divergence", divergence}};
}

std::optional<ReductionState> ReductionState::FromJson(const nlohmann::json& j, const std::string& source,
                                                       const std::string& backend) {
  if (!j.is_object() || j.value("source", std::string()) != source || j.value("backend", std::string()) != backend ||
      !j.contains("signature"))
    return std::nullopt;
  auto sig = Signature::FromJson(j["signature"]);
  if (!sig.ok()) return std::nullopt;
  ReductionState s;
  s.source = source;
  s.original = *sig;
  s.confirm = j.value("confirm", nlohmann::json({{"runs", 0}, {"failing", 0}}));
  s.stages = j.value("stages", nlohmann::json());
  s.first_failing_stage = j.value("first_failing_stage", std::string());
  s.graph_index = j.value("graph_index", size_t{0});
  s.culprit = j.value("culprit", nlohmann::json());
  s.localization = j.value("localization", nlohmann::json());
  s.divergence = j.value("divergence", nlohmann::json());
  s.passes = j.value("passes", nlohmann::json::array());
  return s;
}

std::optional<ReductionState> ReductionState::LoadCheckpoint(const std::filesystem::path& out,
                                                             const experiment::ExperimentSpec& base, size_t graph_count) {
  auto text = ReadFile(out / "state.json");
  if (!text.ok() || !std::filesystem::exists(out / "checkpoint" / "manifest.json")) return std::nullopt;
  auto restored = FromJson(nlohmann::json::parse(*text, nullptr, false), base.repro, base.backend);
  if (!restored || restored->graph_index >= graph_count) return std::nullopt;
  auto cp = ReproDir::Load(out / "checkpoint");
  if (!cp.ok()) return std::nullopt;
  restored->base = base;
  restored->current = cp->graphs()[0].graph.Clone();
  return restored;
}

void ReductionState::SaveCheckpoint(const std::filesystem::path& out, const CandidateWriter& writer, const ir::Graph& g) const {
  (void)writer.Write(g, out / "checkpoint", original.ToJson());
  (void)WriteFileAtomic(out / "state.json", ToJson().dump(2));
}

}  // namespace parity::minifier
