// A repro dir: data only (docs/format.md). manifest.json, graphs/<name>.json and
// tensors.safetensors holding the real captured parameters, buffers, inputs and eager outputs.
// Loading validates everything and never runs code.
#pragma once

#include <ATen/core/Tensor.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "repro/graph.h"
#include "repro/safetensors.h"
#include "util/status.h"

namespace parity {

// Version 2 adds symbolic graphs, version 3 subgraphs (docs/format.md); versions 1 and 2 load as
// they are.
inline constexpr int kReproFormatVersion = 3;
inline constexpr int kOldestReproFormatVersion = 1;

struct GraphEntry {
  std::string name;
  std::string file;                           // relative to the repro dir
  std::map<std::string, std::string> inputs;  // placeholder name -> tensor key
  std::vector<std::string> expected_outputs;  // tensor keys of the eager outputs, in output order
  std::vector<std::string> output_names;      // readable names of the outputs (e.g. "logits")
  // What the program ran this graph as (the dump backend records it per graph); empty in the
  // manifest: the manifest's top-level value, which the loader fills in.
  std::string mode;    // eval | train
  std::string dtype;   // the least precise floating dtype of its inputs and parameters
  std::string device;  // where it was captured (informative: an experiment runs every graph on one device)
  std::string amp;     // the autocast dtype it ran under ("" = none)
  // Train graphs of a real program: the gradient its backward fed to each output (a tensor key,
  // "" where none flowed). Empty: the graph's first output is a scalar loss (suite captures).
  std::vector<std::string> tangents;
  // Which inputs (placeholder names) and parameters (tensor keys) the program differentiated.
  // Unset: every floating input and parameter.
  std::optional<std::set<std::string>> requires_grad;
  // A train graph's backward recorded as a graph of its own (tensor subclasses: DTensor): the
  // name of the graph whose inputs' gradients this one's outputs are ("" for any other graph).
  std::string backward_of;
  nlohmann::json extra = nlohmann::json::object();  // fields parity does not interpret, kept on rewrite
  ir::Graph graph;

  bool has_tangents() const { return !tangents.empty(); }
  // This entry with `g` as its graph, every other field copied (a Graph is not copyable).
  GraphEntry WithGraph(ir::Graph g) const;
  // Whether a train run differentiates the input or parameter `name` (placeholder or key).
  bool Differentiates(const std::string& name) const { return !requires_grad || requires_grad->count(name) > 0; }
};

// A graph op that is not ATen, registered from Python (torch.library): run in the Python worker.
struct HostOp {
  std::string schema;         // its FunctionSchema, e.g. "mylib::scale(Tensor x, float s) -> Tensor"
  std::string module;         // the module whose import registers it ("" = unknown: needs --import)
  std::string path = "host";  // how capture kept it: "host" (called in the worker)
};

struct Manifest {
  int version = kReproFormatVersion;
  std::string torch_version;
  std::string producer;
  std::string model;
  std::string suite = "repro";  // the benchmark suite whose tolerances apply (huggingface, timm, ...)
  int batch_size = 0;           // the batch size the capture used; 0 = not recorded
  std::string mode = "eval";    // eval | train
  std::string dtype = "float32";
  std::string device = "cpu";
  std::string tensors_file = "tensors.safetensors";
  std::string tensors_sha256;  // the tensors file's SHA-256, written at capture, checked on load; empty: none recorded
  std::optional<std::string> backend;
  nlohmann::json backend_options = nlohmann::json::object();
  nlohmann::json failure;                           // null when none recorded
  std::map<std::string, HostOp> host_ops;           // "ns::op.overload" -> what makes it callable
  nlohmann::json extra = nlohmann::json::object();  // fields parity does not interpret, kept on rewrite
};

class ReproDir {
 public:
  // Checks the tensors file against the manifest's tensors_sha256 unless $PARITY_NO_VERIFY_DIGESTS
  // is set (`parity --no-verify-digests`); a file already checked in this process (same path,
  // size and mtime) is not hashed again.
  [[nodiscard]] static Expected<ReproDir> Load(const std::filesystem::path& dir);
  // The tensors file as this load checked its digest (its path, size and mtime, and the manifest's
  // digest), "" when it was not checked. A process handing the dir to another one of parity's
  // (the driver to an experiment's child, in its spec) passes it along; the other calls
  // TrustVerifiedTensors with it, and its Load does not hash the file again while its path, size
  // and mtime are those (a big dir's hash is most of its read).
  const std::string& verified_tensors() const { return verified_tensors_; }
  static void TrustVerifiedTensors(const std::string& verified);

  const std::filesystem::path& root() const { return root_; }
  const Manifest& manifest() const { return manifest_; }
  Manifest& mutable_manifest() { return manifest_; }
  const std::vector<GraphEntry>& graphs() const { return graphs_; }
  std::vector<GraphEntry>& mutable_graphs() { return graphs_; }
  const safetensors::File& tensors() const { return *tensors_; }
  [[nodiscard]] Expected<at::Tensor> Tensor(const std::string& key) const { return tensors_->Get(key); }
  // The tensors a graph needs: placeholder name -> input, get_attr target -> tensor.
  [[nodiscard]] Expected<std::map<std::string, at::Tensor>> Inputs(const GraphEntry& g) const;
  [[nodiscard]] Expected<std::map<std::string, at::Tensor>> Attrs(const GraphEntry& g) const;
  [[nodiscard]] Expected<std::vector<at::Tensor>> ExpectedOutputs(const GraphEntry& g) const;

 private:
  [[nodiscard]] static Expected<ReproDir> LoadChecked(const std::filesystem::path& dir);
  std::filesystem::path root_;
  Manifest manifest_;
  std::vector<GraphEntry> graphs_;
  std::optional<safetensors::File> tensors_;
  std::string verified_tensors_;
};

// The top-level fields of the manifest of the repro dir `dir` (its "device" among them, with the
// format's default), read and checked as ReproDir::Load reads them, without its graphs or
// tensors: what a caller needs to know of a dir before reading it whole.
[[nodiscard]] Expected<Manifest> ReadManifest(const std::filesystem::path& dir);

// Writes a repro dir: graph JSON files, the manifest and `tensors` (key -> tensor). Existing
// files of the same names are replaced atomically.
[[nodiscard]] Status WriteReproDir(const std::filesystem::path& dir, const Manifest& manifest,
                                   const std::vector<const GraphEntry*>& graphs,
                                   const std::vector<std::pair<std::string, at::Tensor>>& tensors);

nlohmann::json ManifestToJson(const Manifest& m, const std::vector<const GraphEntry*>& graphs);

}  // namespace parity
