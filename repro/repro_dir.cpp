#include "repro/repro_dir.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <set>

#include "repro/dtypes.h"
#include "repro/graph_json.h"
#include "util/files.h"
#include "util/json.h"

namespace parity {

GraphEntry GraphEntry::WithGraph(ir::Graph g) const {
  GraphEntry e;
  e.name = name;
  e.file = file;
  e.inputs = inputs;
  e.expected_outputs = expected_outputs;
  e.output_names = output_names;
  e.mode = mode;
  e.dtype = dtype;
  e.device = device;
  e.amp = amp;
  e.tangents = tangents;
  e.requires_grad = requires_grad;
  e.backward_of = backward_of;
  e.extra = extra;
  e.graph = std::move(g);
  return e;
}
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

Expected<std::string> GetString(const json& j, const char* key, const std::string& where, bool required,
                                const std::string& fallback = "") {
  if (!j.contains(key)) {
    if (required) return Error::BadInput(where + ": field \"" + key + "\" is missing");
    return fallback;
  }
  if (!j[key].is_string()) return Error::BadInput(where + ": field \"" + key + "\" is not a string");
  return j[key].get<std::string>();
}

// Caps on what the loader reads (a manifest or graph file is JSON text; tensors are mapped).
constexpr uint64_t kMaxManifestBytes = uint64_t{64} << 20;
constexpr uint64_t kMaxGraphBytes = uint64_t{4} << 30;

// A field naming the dtype a capture ran in (`dtype`) or under autocast (`amp`, `autocast`): a
// dtype torch knows, a floating one under autocast. Both choose the tolerance, so a name that is
// not one is bad input, never a silent float32.
Status CheckDtypeName(const std::string& value, const std::string& where, const char* key, bool autocast) {
  auto t = ir::ParseTorchDtype(value);
  if (!t.ok()) return Error::BadInput(where + ": field \"" + key + "\" is \"" + value + "\", not a torch dtype name");
  if (autocast && !c10::isFloatingType(*t))
    return Error::BadInput(where + ": field \"" + key + "\" is \"" + value +
                           "\", not a floating dtype (autocast's: bfloat16, float16)");
  return Status::Ok();
}

// A path from the manifest must be relative and stay inside the repro dir.
Status CheckInside(const fs::path& root, const std::string& rel, const std::string& where) {
  fs::path p(rel);
  if (p.is_absolute())
    return Error::BadInput(where + ": \"" + rel + "\" is an absolute path; paths must be relative to the repro dir");
  for (const auto& part : p)
    if (part == "..") return Error::BadInput(where + ": \"" + rel + "\" leaves the repro dir");
  if (!IsInside(root, root / p)) return Error::BadInput(where + ": \"" + rel + "\" resolves outside the repro dir");
  return Status::Ok();
}

Status CheckMeta(const at::Tensor& t, const ir::Node& n, const std::string& where) {
  if (n.meta.empty() || !n.meta[0]) return Status::Ok();
  const ir::TensorMeta& m = *n.meta[0];
  if (t.scalar_type() != m.dtype || t.sizes().vec() != m.shape)
    return Error::BadInput(where + ": tensor is " + ir::TorchDtypeName(t.scalar_type()) + c10::str(t.sizes()) + " but node \"" +
                           n.name() + "\" expects " + ir::TorchDtypeName(m.dtype) + c10::str(c10::IntArrayRef(m.shape)));
  return Status::Ok();
}

}  // namespace

namespace {

Expected<std::map<std::string, HostOp>> ReadHostOps(const json& j, const std::string& mw) {
  if (!j.is_object()) return Error::BadInput(mw + ": field \"host_ops\" is not an object");
  std::map<std::string, HostOp> out;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string w = mw + ": host_ops[\"" + it.key() + "\"]";
    if (it.key().find("::") == std::string::npos) return Error::BadInput(w + ": not a qualified op name (ns::op)");
    if (!it.value().is_object()) return Error::BadInput(w + ": not an object");
    HostOp op;
    PARITY_ASSIGN_OR_RETURN(op.schema, GetString(it.value(), "schema", w, true));
    if (it.value().contains("module") && !it.value()["module"].is_null()) {
      PARITY_ASSIGN_OR_RETURN(op.module, GetString(it.value(), "module", w, false));
    }
    PARITY_ASSIGN_OR_RETURN(op.path, GetString(it.value(), "path", w, false, "host"));
    out[it.key()] = std::move(op);
  }
  return out;
}

// The manifest's top-level fields (graphs are read separately).
Expected<Manifest> ReadManifestFields(const json& j, const std::string& mw) {
  if (j.contains("format") && j["format"] == "parity.distributed")  // distributed/world.h
    return Error::Unsupported(mw + ": field \"format\" is \"parity.distributed\": a multi-rank dir (each rank's capture in "
                              "its own dir); `parity repro run`, `verify`, `ci` and `minify` take it, other commands one rank's "
                              "dir (its \"ranks\" entries)");
  if (!j.contains("version") || !j["version"].is_number_integer())
    return Error::BadInput(mw + ": field \"version\" is missing or not an integer");
  if (j["version"].get<int>() < kOldestReproFormatVersion || j["version"].get<int>() > kReproFormatVersion)
    return Error::BadInput(mw + ": field \"version\" is " + j["version"].dump() + ", this parity reads versions " +
                           std::to_string(kOldestReproFormatVersion) + " to " + std::to_string(kReproFormatVersion));
  Manifest m;
  PARITY_ASSIGN_OR_RETURN(m.torch_version, GetString(j, "torch_version", mw, false));
  PARITY_ASSIGN_OR_RETURN(m.producer, GetString(j, "producer", mw, false));
  PARITY_ASSIGN_OR_RETURN(m.model, GetString(j, "model", mw, false));
  PARITY_ASSIGN_OR_RETURN(m.suite, GetString(j, "suite", mw, false, "repro"));
  if (j.contains("batch_size")) {
    if (!j["batch_size"].is_number_integer() || j["batch_size"].get<int64_t>() < 0)
      return Error::BadInput(mw + ": field \"batch_size\" is not a non-negative integer");
    m.batch_size = j["batch_size"].get<int>();
  }
  PARITY_ASSIGN_OR_RETURN(m.mode, GetString(j, "mode", mw, false, "eval"));
  if (m.mode != "eval" && m.mode != "train")
    return Error::BadInput(mw + ": field \"mode\" is \"" + m.mode + "\", expected \"eval\" or \"train\"");
  PARITY_ASSIGN_OR_RETURN(m.dtype, GetString(j, "dtype", mw, false, "float32"));
  PARITY_RETURN_IF_ERROR(CheckDtypeName(m.dtype, mw, "dtype", false));
  if (j.contains("amp")) {
    PARITY_ASSIGN_OR_RETURN(std::string amp, GetString(j, "amp", mw, false));
    if (!amp.empty()) PARITY_RETURN_IF_ERROR(CheckDtypeName(amp, mw, "amp", true));
  }
  PARITY_ASSIGN_OR_RETURN(m.device, GetString(j, "device", mw, false, "cpu"));
  PARITY_ASSIGN_OR_RETURN(m.tensors_file, GetString(j, "tensors", mw, false, "tensors.safetensors"));
  PARITY_ASSIGN_OR_RETURN(m.tensors_sha256, GetString(j, "tensors_sha256", mw, false, ""));
  if (!m.tensors_sha256.empty() &&
      (m.tensors_sha256.size() != 64 || m.tensors_sha256.find_first_not_of("0123456789abcdef") != std::string::npos))
    return Error::BadInput(mw + ": field \"tensors_sha256\" is not a lower-case hex SHA-256");
  if (j.contains("backend") && !j["backend"].is_null()) {
    const json& b = j["backend"];
    if (!b.is_object()) return Error::BadInput(mw + ": field \"backend\" is not an object");
    PARITY_ASSIGN_OR_RETURN(std::string bname, GetString(b, "name", mw + ": backend", true));
    m.backend = bname;
    if (b.contains("options")) {
      if (!b["options"].is_object()) return Error::BadInput(mw + ": field \"backend.options\" is not an object");
      m.backend_options = b["options"];
    }
  }
  if (j.contains("failure")) m.failure = j["failure"];
  if (j.contains("host_ops")) {
    PARITY_ASSIGN_OR_RETURN(m.host_ops, ReadHostOps(j["host_ops"], mw));
  }
  static const std::set<std::string> known = {"format",  "version",    "torch_version", "producer", "model",
                                              "suite",   "batch_size", "mode",          "dtype",    "device",
                                              "tensors", "backend",    "failure",       "graphs",   "host_ops"};
  for (auto it = j.begin(); it != j.end(); ++it)
    if (!known.count(it.key())) m.extra[it.key()] = it.value();
  return m;
}

Status ReadStringList(const json& jg, const char* key, const std::string& gw, std::vector<std::string>& dst) {
  if (!jg.contains(key)) return Status::Ok();
  if (!jg[key].is_array()) return Error::BadInput(gw + ": field \"" + key + "\" is not an array");
  for (const auto& s : jg[key]) {
    if (!s.is_string()) return Error::BadInput(gw + ": field \"" + key + "\" holds a non-string");
    dst.push_back(s.get<std::string>());
  }
  return Status::Ok();
}

// One entry of "graphs" and the graph JSON it names (not yet checked against the tensors).
Expected<GraphEntry> ReadGraphEntry(const json& jg, const Manifest& m, const fs::path& dir, const std::string& gw) {
  if (!jg.is_object()) return Error::BadInput(gw + ": not an object");
  GraphEntry e;
  PARITY_ASSIGN_OR_RETURN(e.name, GetString(jg, "name", gw, true));
  PARITY_ASSIGN_OR_RETURN(e.file, GetString(jg, "file", gw, true));
  PARITY_RETURN_IF_ERROR(CheckInside(dir, e.file, gw + ": field \"file\""));
  if (!jg.contains("inputs") || !jg["inputs"].is_object())
    return Error::BadInput(gw + ": field \"inputs\" is missing or not an object");
  for (auto it = jg["inputs"].begin(); it != jg["inputs"].end(); ++it) {
    if (!it.value().is_string()) return Error::BadInput(gw + ": field \"inputs." + it.key() + "\" is not a string");
    e.inputs[it.key()] = it.value().get<std::string>();
  }
  PARITY_RETURN_IF_ERROR(ReadStringList(jg, "expected_outputs", gw, e.expected_outputs));
  PARITY_RETURN_IF_ERROR(ReadStringList(jg, "output_names", gw, e.output_names));
  PARITY_ASSIGN_OR_RETURN(e.mode, GetString(jg, "mode", gw, false, m.mode));
  if (e.mode != "eval" && e.mode != "train")
    return Error::BadInput(gw + ": field \"mode\" is \"" + e.mode + "\", expected \"eval\" or \"train\"");
  PARITY_ASSIGN_OR_RETURN(e.dtype, GetString(jg, "dtype", gw, false, m.dtype));
  PARITY_RETURN_IF_ERROR(CheckDtypeName(e.dtype, gw, "dtype", false));
  PARITY_ASSIGN_OR_RETURN(e.device, GetString(jg, "device", gw, false, m.device));
  const std::string top_amp = m.extra.contains("amp") && m.extra["amp"].is_string() ? m.extra["amp"].get<std::string>() : "";
  PARITY_ASSIGN_OR_RETURN(e.amp, GetString(jg, "amp", gw, false, top_amp));
  if (!e.amp.empty()) PARITY_RETURN_IF_ERROR(CheckDtypeName(e.amp, gw, "amp", true));
  if (jg.contains("tangents")) {
    if (!jg["tangents"].is_array()) return Error::BadInput(gw + ": field \"tangents\" is not an array");
    for (const auto& t : jg["tangents"]) {
      if (!t.is_null() && !t.is_string()) return Error::BadInput(gw + ": field \"tangents\" holds neither a tensor key nor null");
      e.tangents.push_back(t.is_null() ? "" : t.get<std::string>());
    }
  }
  if (jg.contains("requires_grad")) {
    std::vector<std::string> names;
    PARITY_RETURN_IF_ERROR(ReadStringList(jg, "requires_grad", gw, names));
    e.requires_grad.emplace(names.begin(), names.end());
  }
  PARITY_ASSIGN_OR_RETURN(e.backward_of, GetString(jg, "backward_of", gw, false, ""));
  if (e.backward_of == e.name) return Error::BadInput(gw + ": field \"backward_of\" names the graph itself");
  static const std::set<std::string> known = {"name",   "file",   "inputs", "expected_outputs", "output_names", "mode",
                                              "dtype",  "device", "amp",    "tangents",         "requires_grad", "backward_of"};
  for (auto it = jg.begin(); it != jg.end(); ++it)
    if (!known.count(it.key())) e.extra[it.key()] = it.value();
  const fs::path gpath = dir / e.file;
  PARITY_ASSIGN_OR_RETURN(std::string gtext, ReadFile(gpath, kMaxGraphBytes));
  PARITY_ASSIGN_OR_RETURN(json gj, ParseJson(gtext, gpath.string()));
  PARITY_ASSIGN_OR_RETURN(e.graph, ir::GraphFromJson(gj, gpath.string()));
  e.graph.set_name(e.name);
  return e;
}

// The tensors files whose digest this process checked, or was told another of parity's processes
// checked (ReproDir::TrustVerifiedTensors), each as DigestKey says it.
std::mutex verified_mu;
std::set<std::string> verified_files;

// A tensors file as checked: where it is, its size and mtime, and the digest it was checked against.
std::string DigestKey(const Manifest& m, const safetensors::File& tensors) {
  std::error_code ec;
  const auto size = fs::file_size(tensors.path(), ec);
  const auto mtime = fs::last_write_time(tensors.path(), ec).time_since_epoch().count();
  return fs::weakly_canonical(tensors.path(), ec).string() + "|" + std::to_string(size) + "|" + std::to_string(mtime) + "|" +
         m.tensors_sha256;
}

// The tensors file is the one captured (a flipped bit would otherwise pass: the fp64 reference
// is recomputed from the same data). Checked once per process per (path, size, mtime); returns
// the file's DigestKey, "" when it is not checked.
Expected<std::string> CheckDigest(const Manifest& m, const safetensors::File& tensors, const std::string& mw) {
  const char* skip = std::getenv("PARITY_NO_VERIFY_DIGESTS");
  if (m.tensors_sha256.empty() || (skip && *skip && std::string(skip) != "0")) return std::string();
  std::string key = DigestKey(m, tensors);
  {
    std::lock_guard<std::mutex> lock(verified_mu);
    if (verified_files.count(key)) return key;
  }
  const std::string got = tensors.Sha256();
  if (got != m.tensors_sha256)
    return Error::BadInput(tensors.path().string() + ": SHA-256 " + got + " does not match " + mw +
                           " field \"tensors_sha256\" (" + m.tensors_sha256 +
                           "): the tensors changed since capture (parity --no-verify-digests loads them anyway)");
  std::lock_guard<std::mutex> lock(verified_mu);
  verified_files.insert(key);
  return key;
}

// Every tensor the graph reads exists and agrees with the captured metadata; every input names
// a placeholder; expected outputs exist, one per returned value.
Status CheckGraphTensors(const GraphEntry& e, const safetensors::File& tensors, const fs::path& dir, const std::string& gw) {
  const std::string gpath = (dir / e.file).string();
  const std::string holder = tensors.path().string();
  for (const ir::Node* n : e.graph.nodes()) {
    if (n->kind() == ir::NodeKind::kPlaceholder && !n->sym.empty()) continue;  // a size: bound from the symbols
    if (n->kind() == ir::NodeKind::kPlaceholder) {
      auto it = e.inputs.find(n->name());
      if (it == e.inputs.end())
        return Error::BadInput(gw + ": field \"inputs\" has no entry for placeholder \"" + n->name() + "\"");
      if (!tensors.contains(it->second))
        return Error::BadInput(gw + ": field \"inputs." + n->name() + "\" names tensor \"" + it->second + "\", which " + holder +
                               " does not hold");
      PARITY_ASSIGN_OR_RETURN(at::Tensor t, tensors.Get(it->second));
      PARITY_RETURN_IF_ERROR(CheckMeta(t, *n, gw + ": field \"inputs." + n->name() + "\""));
    } else if (n->kind() == ir::NodeKind::kGetAttr) {
      if (!tensors.contains(n->target()))
        return Error::BadInput(gpath + ": node \"" + n->name() + "\": get_attr target \"" + n->target() + "\" is not in " +
                               holder);
      PARITY_ASSIGN_OR_RETURN(at::Tensor t, tensors.Get(n->target()));
      PARITY_RETURN_IF_ERROR(CheckMeta(t, *n, gpath + ": node \"" + n->name() + "\""));
    }
  }
  for (const auto& [ph, key] : e.inputs)
    if (!e.graph.Find(ph) || e.graph.Find(ph)->kind() != ir::NodeKind::kPlaceholder)
      return Error::BadInput(gw + ": field \"inputs." + ph + "\" names no placeholder of " + gpath);
  for (const auto& key : e.expected_outputs)
    if (!tensors.contains(key))
      return Error::BadInput(gw + ": field \"expected_outputs\" names tensor \"" + key + "\", which " + holder +
                             " does not hold");
  if (e.has_tangents()) {
    const auto outs = e.graph.OutputValues();
    if (e.tangents.size() != outs.size())
      return Error::BadInput(gw + ": field \"tangents\" has " + std::to_string(e.tangents.size()) +
                             " entries but the graph returns " + std::to_string(outs.size()) + " values");
    for (size_t k = 0; k < e.tangents.size(); ++k) {
      if (e.tangents[k].empty()) continue;
      const std::string tw = gw + ": field \"tangents[" + std::to_string(k) + "]\"";
      if (!tensors.contains(e.tangents[k]))
        return Error::BadInput(tw + " names tensor \"" + e.tangents[k] + "\", which " + holder + " does not hold");
      PARITY_ASSIGN_OR_RETURN(at::Tensor t, tensors.Get(e.tangents[k]));
      PARITY_RETURN_IF_ERROR(CheckMeta(t, *outs[k], tw));
      if (k < e.expected_outputs.size() && tensors.contains(e.expected_outputs[k])) {  // a gradient has its output's shape
        PARITY_ASSIGN_OR_RETURN(at::Tensor o, tensors.Get(e.expected_outputs[k]));
        if (o.sizes() != t.sizes())
          return Error::BadInput(tw + ": tensor is " + c10::str(t.sizes()) + " but output " + std::to_string(k) + " expects " +
                                 c10::str(o.sizes()));
      }
    }
  }
  if (e.requires_grad) {
    std::set<std::string> attr_targets;
    for (const ir::Node* n : e.graph.nodes())
      if (n->kind() == ir::NodeKind::kGetAttr) attr_targets.insert(n->target());
    for (const auto& name : *e.requires_grad) {
      const ir::Node* n = e.graph.Find(name);
      const bool placeholder = n && n->kind() == ir::NodeKind::kPlaceholder;
      const bool attr = attr_targets.count(name) > 0;
      if (!placeholder && !attr)
        return Error::BadInput(gw + ": field \"requires_grad\" names \"" + name + "\", neither a placeholder nor a get_attr target of " +
                               gpath);
    }
  }
  if (!e.expected_outputs.empty() && e.expected_outputs.size() != e.graph.OutputValues().size())
    return Error::BadInput(gw + ": field \"expected_outputs\" has " + std::to_string(e.expected_outputs.size()) +
                           " entries but the graph returns " + std::to_string(e.graph.OutputValues().size()) + " values");
  return Status::Ok();
}

}  // namespace

Expected<ReproDir> ReproDir::Load(const fs::path& dir) {
  try {
    return LoadChecked(dir);
  } catch (const nlohmann::json::exception& e) {  // a JSON accessor missed by the typed checks: still bad input
    return Error::BadInput((dir / "manifest.json").string() + " (or a file it names): unexpected JSON type: " + e.what());
  }
}

namespace {
// The manifest file of `dir` as JSON (an object), checked as every path the manifest names is.
Expected<json> ReadManifestJson(const fs::path& dir, const std::string& mw) {
  if (!fs::is_directory(dir)) return Error::BadInput(dir.string() + ": not a directory");
  PARITY_RETURN_IF_ERROR(CheckInside(dir, "manifest.json", mw));  // the same rule as every path the manifest names
  PARITY_ASSIGN_OR_RETURN(std::string text, ReadFile(dir / "manifest.json", kMaxManifestBytes));
  PARITY_ASSIGN_OR_RETURN(json j, ParseJson(text, mw));
  if (!j.is_object()) return Error::BadInput(mw + ": top level is not a JSON object");
  return j;
}
}  // namespace

Expected<Manifest> ReadManifest(const fs::path& dir) {
  const std::string mw = (dir / "manifest.json").string();
  try {
    PARITY_ASSIGN_OR_RETURN(json j, ReadManifestJson(dir, mw));
    return ReadManifestFields(j, mw);
  } catch (const nlohmann::json::exception& e) {  // as in Load
    return Error::BadInput(mw + ": unexpected JSON type: " + e.what());
  }
}

Expected<ReproDir> ReproDir::LoadChecked(const fs::path& dir) {
  ReproDir r;
  r.root_ = dir;
  const std::string mw = (dir / "manifest.json").string();
  PARITY_ASSIGN_OR_RETURN(json j, ReadManifestJson(dir, mw));
  PARITY_ASSIGN_OR_RETURN(r.manifest_, ReadManifestFields(j, mw));
  PARITY_RETURN_IF_ERROR(CheckInside(dir, r.manifest_.tensors_file, mw + ": field \"tensors\""));
  PARITY_ASSIGN_OR_RETURN(safetensors::File tensors, safetensors::File::Open(dir / r.manifest_.tensors_file));
  r.tensors_.emplace(std::move(tensors));
  if (j.contains("graphs") && j["graphs"].is_array() && j["graphs"].empty() && j.contains("skipped_graphs") &&
      j["skipped_graphs"].is_array() && !j["skipped_graphs"].empty())
    return Error::BadInput(mw + ": field \"graphs\" is empty: the capture recorded no graph (field \"skipped_graphs\": " +
                           j["skipped_graphs"].dump().substr(0, 400) + ")");
  if (!j.contains("graphs") || !j["graphs"].is_array() || j["graphs"].empty())
    return Error::BadInput(mw + ": field \"graphs\" is missing, not an array, or empty");
  std::set<std::string> graph_names;
  for (size_t k = 0; k < j["graphs"].size(); ++k) {
    const std::string gw = mw + ": graphs[" + std::to_string(k) + "]";
    PARITY_ASSIGN_OR_RETURN(GraphEntry e, ReadGraphEntry(j["graphs"][k], r.manifest_, dir, gw));
    if (!graph_names.insert(e.name).second) return Error::BadInput(gw + ": duplicate graph name \"" + e.name + "\"");
    PARITY_RETURN_IF_ERROR(CheckGraphTensors(e, *r.tensors_, dir, gw));
    r.graphs_.push_back(std::move(e));
  }
  // last: structural errors are named first
  PARITY_ASSIGN_OR_RETURN(r.verified_tensors_, CheckDigest(r.manifest_, *r.tensors_, mw));
  return r;
}

void ReproDir::TrustVerifiedTensors(const std::string& verified) {
  if (verified.empty()) return;
  std::lock_guard<std::mutex> lock(verified_mu);
  verified_files.insert(verified);
}

Expected<std::map<std::string, at::Tensor>> ReproDir::Inputs(const GraphEntry& g) const {
  std::map<std::string, at::Tensor> out;
  for (const auto& [ph, key] : g.inputs) {
    PARITY_ASSIGN_OR_RETURN(out[ph], tensors_->Get(key));
  }
  return out;
}

Expected<std::map<std::string, at::Tensor>> ReproDir::Attrs(const GraphEntry& g) const {
  std::map<std::string, at::Tensor> out;
  for (const ir::Node* n : g.graph.nodes())
    if (n->kind() == ir::NodeKind::kGetAttr && !out.count(n->target())) {
      PARITY_ASSIGN_OR_RETURN(out[n->target()], tensors_->Get(n->target()));
    }
  return out;
}

Expected<std::vector<at::Tensor>> ReproDir::ExpectedOutputs(const GraphEntry& g) const {
  std::vector<at::Tensor> out;
  for (const auto& key : g.expected_outputs) {
    PARITY_ASSIGN_OR_RETURN(at::Tensor t, tensors_->Get(key));
    out.push_back(std::move(t));
  }
  return out;
}

json ManifestToJson(const Manifest& m, const std::vector<const GraphEntry*>& graphs) {
  json j = m.extra;
  j["format"] = "parity.repro";
  j["version"] = kReproFormatVersion;
  j["torch_version"] = m.torch_version;
  j["producer"] = m.producer;
  j["model"] = m.model;
  j["suite"] = m.suite;
  if (m.batch_size > 0) j["batch_size"] = m.batch_size;
  j["mode"] = m.mode;
  j["dtype"] = m.dtype;
  j["device"] = m.device;
  j["tensors"] = m.tensors_file;
  if (!m.tensors_sha256.empty()) j["tensors_sha256"] = m.tensors_sha256;
  if (m.backend) j["backend"] = {{"name", *m.backend}, {"options", m.backend_options}};
  if (!m.failure.is_null()) j["failure"] = m.failure;
  for (const auto& [name, op] : m.host_ops)
    j["host_ops"][name] = {{"schema", op.schema}, {"module", op.module.empty() ? json() : json(op.module)}, {"path", op.path}};
  json gs = json::array();
  for (const GraphEntry* g : graphs) {
    json jg = g->extra;
    jg.update({{"name", g->name}, {"file", g->file}, {"inputs", g->inputs}});
    if (!g->expected_outputs.empty()) jg["expected_outputs"] = g->expected_outputs;
    if (!g->output_names.empty()) jg["output_names"] = g->output_names;
    // Per-graph facts only where they differ from the top level (a rewrite keeps old dirs' shape).
    if (!g->mode.empty() && g->mode != m.mode) jg["mode"] = g->mode;
    if (!g->dtype.empty() && g->dtype != m.dtype) jg["dtype"] = g->dtype;
    if (!g->device.empty() && g->device != m.device) jg["device"] = g->device;
    if (!g->amp.empty() && !(m.extra.contains("amp") && m.extra["amp"] == g->amp)) jg["amp"] = g->amp;
    if (g->has_tangents()) {
      json t = json::array();
      for (const auto& k : g->tangents) t.push_back(k.empty() ? json() : json(k));
      jg["tangents"] = t;
    }
    if (!g->backward_of.empty()) jg["backward_of"] = g->backward_of;
    if (g->requires_grad) jg["requires_grad"] = std::vector<std::string>(g->requires_grad->begin(), g->requires_grad->end());
    gs.push_back(std::move(jg));
  }
  j["graphs"] = gs;
  return j;
}

Status WriteReproDir(const fs::path& dir, const Manifest& manifest, const std::vector<const GraphEntry*>& graphs,
                     const std::vector<std::pair<std::string, at::Tensor>>& tensors) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Error::Runtime(dir.string() + ": cannot create: " + ec.message());
  for (const GraphEntry* g : graphs) {
    PARITY_RETURN_IF_ERROR(WriteFileAtomic(dir / g->file, ir::GraphToJson(g->graph).dump(1) + "\n"));
  }
  PARITY_RETURN_IF_ERROR(safetensors::Save(dir / manifest.tensors_file, tensors));
  PARITY_ASSIGN_OR_RETURN(safetensors::File written, safetensors::File::Open(dir / manifest.tensors_file));
  Manifest m = manifest;
  m.tensors_sha256 = written.Sha256();
  return WriteFileAtomic(dir / "manifest.json", ManifestToJson(m, graphs).dump(2) + "\n");
}

}  // namespace parity
