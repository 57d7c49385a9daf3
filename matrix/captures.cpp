#include "matrix/captures.h"

#include <unistd.h>

#include <fstream>

#include "runtime/worker_requests.h"
#include "util/files.h"

namespace parity::matrix {
namespace fs = std::filesystem;

Expected<std::string> CaptureCache::Get(const experiment::ExperimentSpec& spec) {
  const std::string key = spec.model + "-" + spec.test + "-" + spec.dtype + "-" + FileNameSlug(spec.device) + "-bs" +
                          std::to_string(spec.batch_size) + "-torch" + FileNameSlug(PARITY_TORCH_VERSION_BUILT);
  const fs::path dir = dir_ / "captures" / key;
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
