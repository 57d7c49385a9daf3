#include "matrix/captures.h"

#include <unistd.h>

#include <fstream>

#include "runtime/worker.h"
#include "runtime/worker_requests.h"
#include "util/digest.h"
#include "util/files.h"

namespace parity::matrix {
namespace fs = std::filesystem;

namespace {
fs::path CaptureDir(const fs::path& cache_dir, const experiment::ExperimentSpec& spec) {
  const std::string key = spec.model + "-" + spec.test + "-" + spec.dtype + "-" + FileNameSlug(spec.device) + "-bs" +
                          std::to_string(spec.batch_size) + "-torch" + FileNameSlug(PARITY_TORCH_VERSION_BUILT);
  return cache_dir / "captures" / key;
}

// models-<stamp>.json: the stamp of what decides the listing (the worker's Python, models.py).
fs::path ListingFile(const fs::path& cache_dir) {
  const fs::path models = fs::path(PARITY_TOOLS_DIR) / "parity_capture" / "models.py";
  return cache_dir / ("models-" + Sha256Hex(runtime::WorkerPython() + "\n" + FileStamp(models)).substr(0, 16) + ".json");
}
}  // namespace

bool CaptureCache::Has(const experiment::ExperimentSpec& spec) const {
  return fs::exists(CaptureDir(dir_, spec) / "manifest.json");
}

std::optional<nlohmann::json> CachedModelListing(const fs::path& cache_dir) {
  auto text = ReadFile(ListingFile(cache_dir));
  if (!text.ok()) return std::nullopt;
  auto j = nlohmann::json::parse(*text, nullptr, false);
  if (!j.is_object() || !j.contains("models")) return std::nullopt;
  return j;
}

Expected<nlohmann::json> ModelListing(const fs::path& cache_dir, const std::function<Expected<nlohmann::json>()>& ask) {
  if (auto cached = CachedModelListing(cache_dir)) return *cached;
  PARITY_ASSIGN_OR_RETURN(nlohmann::json listing, ask());
  std::error_code ec;
  fs::create_directories(cache_dir, ec);
  (void)WriteFileAtomic(ListingFile(cache_dir), listing.dump());  // a cache: a failed write costs the next run an ask
  return listing;
}

Expected<std::string> CaptureCache::Get(const experiment::ExperimentSpec& spec) {
  const fs::path dir = CaptureDir(dir_, spec);
  if (fs::exists(dir / "manifest.json")) return dir.string();
  std::error_code ec;
  fs::create_directories(dir.parent_path(), ec);
  const fs::path tmp = dir.string() + ".tmp" + std::to_string(::getpid());
  RemoveAll(tmp);
  PARITY_RETURN_IF_ERROR(ask_(runtime::requests::CaptureModel(
      {spec.model, fs::absolute(tmp).string(), spec.test, spec.dtype, spec.device, spec.batch_size})));
  fs::rename(tmp, dir, ec);
  if (ec && !fs::exists(dir / "manifest.json"))
    return Error::Runtime("cannot store capture in " + dir.string() + ": " + ec.message());
  return dir.string();
}

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "cpu";
}

}  // namespace parity::matrix
