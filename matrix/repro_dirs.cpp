#include "matrix/repro_dirs.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <optional>
#include <set>

#include "host_ops/host_ops.h"
#include "interpreter/interpreter.h"

namespace parity::matrix {

std::shared_ptr<const ReproDir> LoadedDirs::Find(const std::string& dir) const {
  for (const auto& d : good)
    if (d.dir == dir || d.absolute == dir) return d.repro;
  return nullptr;
}

Status CheckCapturedAs(const ReproDir& r, const MatrixOptions& o) {
  const Manifest& m = r.manifest();
  auto check = [&](const std::vector<std::string>& asked, const std::string& held, const char* field,
                   const char* flag) -> Status {
    if (asked.empty() || std::find(asked.begin(), asked.end(), held) != asked.end()) return Status::Ok();
    return Error::BadInput((r.root() / "manifest.json").string() + ": field \"" + field + "\" is \"" + held + "\", but " + flag +
                           " asks for " + asked.front() + "; a repro dir runs as it was captured (capture the model with " +
                           flag + " " + asked.front() + ", or leave " + flag + " out)");
  };
  PARITY_RETURN_IF_ERROR(check(o.tests, m.mode, "mode", "--test"));
  return check(o.dtypes, m.dtype, "dtype", "--dtype");
}

namespace {

Status Check(const ReproDir& r, const MatrixOptions& o) {
  PARITY_RETURN_IF_ERROR(host_ops::CheckHostOpsApproved(r, o.experiment.imports));  // nothing imported without approval
  std::set<std::string> host_ops;
  for (const auto& [name, op] : r.manifest().host_ops) host_ops.insert(name);
  for (const auto& g : r.graphs())  // an op this torch lacks: exit 2 naming it, not EAGER_FAILED per experiment
    PARITY_RETURN_IF_ERROR(interp::CheckOpsKnown(g.graph, (r.root() / g.file).string(), host_ops));
  return CheckCapturedAs(r, o);
}

Expected<std::shared_ptr<const ReproDir>> LoadChecked(const std::string& dir, const MatrixOptions& o,
                                                      const std::vector<LoadedDir>& read) {
  for (const auto& d : read)
    if (d.dir == dir) {
      PARITY_RETURN_IF_ERROR(Check(*d.repro, o));
      return d.repro;
    }
  PARITY_ASSIGN_OR_RETURN(ReproDir r, ReproDir::Load(dir));
  PARITY_RETURN_IF_ERROR(Check(r, o));
  return std::make_shared<const ReproDir>(std::move(r));
}

}  // namespace

LoadedDirs LoadReproDirs(const MatrixOptions& o, const std::vector<LoadedDir>& read) {
  // The dirs are read at once, one per thread as the threads come free: most of a big dir's read
  // is its tensors' SHA-256 (one pass over the whole file: 0.1 s for a BERT captured at the GPU
  // bench's size, 266 MB, on this project's 2-core VM), and nothing starts before every dir is
  // read. Each dir's outcome is its own; the lists keep the order given.
  const auto& dirs = o.repro_dirs;
  std::vector<std::optional<Expected<std::shared_ptr<const ReproDir>>>> loaded(dirs.size());
  std::atomic<int64_t> next{0};
  const auto n = static_cast<int64_t>(dirs.size());
  at::parallel_for(0, std::min<int64_t>(n, at::get_num_threads()), 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t)
      for (int64_t k = next.fetch_add(1); k < n; k = next.fetch_add(1)) loaded[k].emplace(LoadChecked(dirs[k], o, read));
  });
  LoadedDirs out;
  for (size_t k = 0; k < dirs.size(); ++k) {
    auto& r = *loaded[k];
    if (r.ok())
      out.good.push_back({dirs[k], std::filesystem::absolute((*r)->root()).string(), std::move(*r)});
    else
      out.bad.push_back({dirs[k], r.error()});
  }
  return out;
}

Status ImportHostOps(const LoadedDirs& dirs, const MatrixOptions& o,
                     const std::function<Expected<nlohmann::json>(const nlohmann::json&)>& ask) {
  for (const auto& d : dirs.good) PARITY_RETURN_IF_ERROR(host_ops::ImportHostOpModules(*d.repro, o.experiment.imports, ask));
  return Status::Ok();
}

namespace {

// Whether a device string (--device, a manifest's "device") names a CUDA device.
bool NamesCuda(const std::string& device) { return device.rfind("cuda", 0) == 0; }

}  // namespace

std::optional<bool> UsesCudaBeforeReading(const MatrixOptions& o) {
  if (o.experiment.device) return NamesCuda(*o.experiment.device);
  bool cuda = false;
  for (const auto& dir : o.repro_dirs) {
    auto m = ReadManifest(dir);
    if (!m.ok()) return std::nullopt;
    cuda = cuda || NamesCuda(m->device);
  }
  return cuda;
}

bool UsesCuda(const MatrixOptions& o, const LoadedDirs& dirs) {
  if (o.experiment.device) return NamesCuda(*o.experiment.device);
  for (const auto& d : dirs.good)
    if (NamesCuda(d.repro->manifest().device)) return true;
  return false;
}

}  // namespace parity::matrix
