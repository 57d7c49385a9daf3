#include "verify/failure_repro.h"

#include <map>
#include <set>

#include "repro/repro_dir.h"
#include "util/digest.h"
#include "util/files.h"
#include "experiment/shapes.h"

namespace parity::verify {
namespace fs = std::filesystem;

namespace {

// A failure seen only at --shapes points (never at a graph's recorded shape): the first such graph
// and point, where the failure reproduces. Nothing when a recorded shape failed, or none was swept.
std::optional<std::pair<const GraphEntry*, sym::Bindings>> SweptFailure(const ReproDir& repro, const experiment::ExperimentResult& r) {
  std::optional<std::pair<const GraphEntry*, sym::Bindings>> first;
  for (const auto& check : r.shapes) {
    if (check.pass) continue;
    const GraphEntry* g = nullptr;
    for (const auto& e : repro.graphs())
      if (e.name == check.graph) g = &e;
    if (!g) continue;
    const sym::Bindings point(check.symbols.begin(), check.symbols.end());
    bool recorded = true;
    for (const auto& [name, s] : g->graph.symbols) recorded = recorded && point.count(name) && point.at(name) == s.hint;
    if (recorded) return std::nullopt;
    if (!first) first = std::make_pair(g, point);
  }
  return first;
}

}  // namespace

std::vector<std::string> FailureReproNames(const std::vector<const experiment::ExperimentSpec*>& specs) {
  std::vector<std::string> names;
  std::map<std::string, std::set<std::string>> sources;  // a name's repro dirs
  for (const auto* spec : specs) {
    names.push_back(FileNameSlug(spec->model + "-" + spec->backend + "-" + spec->test + "-" + spec->dtype + "-" + spec->device));
    sources[names.back()].insert(spec->repro);
  }
  for (size_t i = 0; i < specs.size(); ++i)
    if (sources[names[i]].size() > 1) names[i] += "-" + Sha256Hex(specs[i]->repro).substr(0, 8);
  return names;
}

Expected<fs::path> WriteFailureRepro(const fs::path& output_dir, const std::string& name, const experiment::ExperimentSpec& spec,
                                     const experiment::ExperimentResult& r) {
  const fs::path dst = output_dir / "repros" / name;
  std::error_code ec;
  RemoveAll(dst);
  fs::create_directories(dst.parent_path(), ec);
  PARITY_ASSIGN_OR_RETURN(ReproDir src, ReproDir::Load(spec.repro));
  nlohmann::json shape = nullptr;
  if (auto swept = SweptFailure(src, r)) {
    // The graph at the shape it failed at, with the very inputs it failed on: minify and repro
    // run reproduce it as recorded.
    PARITY_RETURN_IF_ERROR(experiment::WriteShapeVariant(src, *swept->first, swept->second, experiment::ShapeSeed(swept->second), dst,
                                                       /*with_expected=*/true));
    shape = swept->second;
  } else {
    fs::copy(spec.repro, dst, fs::copy_options::recursive, ec);
    if (ec) return Error::Runtime("cannot copy " + spec.repro + " to " + dst.string() + ": " + ec.message());
  }
  PARITY_ASSIGN_OR_RETURN(ReproDir repro, ReproDir::Load(dst));
  Manifest m = repro.manifest();
  // Where it failed is where it reproduces: minify and repro run take the device from here (each
  // graph keeps the device it was captured on).
  for (auto& g : repro.mutable_graphs())
    if (g.device.empty()) g.device = m.device;
  m.device = spec.device;
  m.backend = spec.backend;
  m.backend_options = spec.backend_options;
  nlohmann::json failing = nlohmann::json::array();
  for (const auto& v : r.outputs)
    if (!v.value("pass", true)) failing.push_back(v.value("path", std::string()));
  m.failure = {{"verification_code", results::ToString(r.code)},
               {"kind", r.code == results::Code::kFail ? "accuracy" : "exception"},
               {"message", r.error},
               {"failing_outputs", failing},
               {"tol", r.tol},
               {"rule", spec.rule},
               {"test", spec.test},
               {"device", spec.device}};
  if (!shape.is_null()) m.failure["shape"] = shape;
  if (!r.justification.empty()) m.failure["justification"] = r.justification;
  std::vector<const GraphEntry*> graphs;
  for (const auto& g : repro.graphs()) graphs.push_back(&g);
  PARITY_RETURN_IF_ERROR(WriteFileAtomic(dst / "manifest.json", ManifestToJson(m, graphs).dump(2) + "\n"));
  return dst;
}

}  // namespace parity::verify
