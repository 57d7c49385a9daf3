// The "interesting" test of the reduction: writes a candidate graph as a repro dir (real
// values; cut edges become placeholders fed with the reference's concrete values), runs it
// through the backend in an isolated process (or the user's --check command) and says whether
// it fails with the original signature. Results are cached by graph text.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "minifier/signature.h"
#include "repro/repro_dir.h"
#include "verifier/isolation.h"

namespace parity::minifier {

class Oracle {
 public:
  struct Config {
    verifier::ExperimentSpec base;        // backend, options, test, device, tol, ...
    Signature original;
    Manifest manifest;                    // of the repro being reduced
    std::string graph_name;
    std::map<std::string, std::string> inputs;  // original placeholders -> tensor keys
    std::filesystem::path scratch;
    std::string check_command;            // --check: exit 0 = still interesting
    int timeout_s = 600;
  };
  // `tensors`: every tensor a candidate may read: the original ones by key, and the reference
  // value of every tensor-valued node as "ref/<node>".
  Oracle(verifier::IsolatedRunner& runner, Config config, const std::map<std::string, at::Tensor>& tensors);

  // True where the candidate reproduces; up to `jobs` candidates run at once.
  std::vector<bool> Test(const std::vector<const ir::Graph*>& candidates);
  // Whether a candidate can be written at all (every placeholder has a concrete value).
  bool Writable(const ir::Graph& g) const;
  [[nodiscard]] Status Write(const ir::Graph& g, const std::filesystem::path& dir, const nlohmann::json& failure) const;

  int backend_runs() const { return backend_runs_; }
  int cache_hits() const { return cache_hits_; }
  const Config& config() const { return config_; }
  // The results of the last Test call, in order (empty entries for cache hits).
  const std::vector<Signature>& last_signatures() const { return last_; }

 private:
  std::string KeyFor(const std::string& placeholder) const;
  verifier::IsolatedRunner& runner_;
  Config config_;
  const std::map<std::string, at::Tensor>& tensors_;
  std::map<std::string, bool> cache_;
  std::vector<Signature> last_;
  int backend_runs_ = 0, cache_hits_ = 0, serial_ = 0;
};

}  // namespace parity::minifier
