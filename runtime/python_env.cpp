#include "runtime/python_env.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <system_error>

namespace parity::runtime {
namespace fs = std::filesystem;

namespace {
std::optional<std::string> Getenv(const char* name) {
  const char* v = std::getenv(name);
  if (!v) return std::nullopt;
  return std::string(v);
}

// Whether `torch_dir` holds bytecode of its own __init__ (any interpreter's tag).
bool HasBytecode(const fs::path& torch_dir) {
  std::error_code ec;
  for (fs::directory_iterator it(torch_dir / "__pycache__", ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind("__init__.", 0) == 0 && it->path().extension() == ".pyc") return true;
  }
  return false;
}
}  // namespace

fs::path ParityCacheDir() {
  if (const char* c = std::getenv("PARITY_CACHE_DIR"); c && *c) return c;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return fs::path(x) / "parity";
  if (const char* h = std::getenv("HOME"); h && *h) return fs::path(h) / ".cache" / "parity";
  return fs::temp_directory_path() / "parity-cache";
}

// Appended, not `std::string(...) + " " + ...`: g++ 12 warns (-Warray-bounds, a false positive on
// the moved temporary) at every build of that, and a user's first build should show no warning.
std::string BuiltTorch() { return std::string(PARITY_TORCH_VERSION_BUILT).append(" ").append(PARITY_TORCH_GIT_BUILT); }

std::vector<std::string> BytecodeCacheEnv(const fs::path& torch_dir,
                                          const std::function<std::optional<std::string>(const char*)>& getenv,
                                          const fs::path& cache_dir) {
  if (torch_dir.empty() || HasBytecode(torch_dir)) return {};
  const auto prefix = getenv("PYTHONPYCACHEPREFIX");
  if (prefix && !prefix->empty()) return {};  // the caller's choice
  const auto dont_write = getenv("PYTHONDONTWRITEBYTECODE");
  const bool writes_beside = !(dont_write && !dont_write->empty()) && ::access(torch_dir.c_str(), W_OK) == 0;
  if (writes_beside) return {};  // the first import writes it there
  return {"PYTHONPYCACHEPREFIX=" + (cache_dir / "pycache").string(), "PYTHONDONTWRITEBYTECODE="};
}

fs::path LoadedTorchPackage() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    const auto slash = line.find('/');
    if (slash == std::string::npos) continue;
    const fs::path lib = line.substr(slash);
    if (lib.filename() != "libc10.so" || lib.parent_path().filename() != "lib") continue;
    const fs::path pkg = lib.parent_path().parent_path();
    std::error_code ec;
    if (fs::exists(pkg / "__init__.py", ec)) return pkg;
  }
  return {};
}

namespace {
// BytecodeCacheEnv's entries for this process's torch, decided once.
const std::vector<std::string>& KeptBytecodeEnv() {
  static const std::vector<std::string> bytecode = BytecodeCacheEnv(LoadedTorchPackage(), Getenv, ParityCacheDir());
  return bytecode;
}
}  // namespace

std::vector<std::string> PythonEnv() {
  const char* pp = std::getenv("PYTHONPATH");
  std::string path = std::string("PYTHONPATH=").append(PARITY_TOOLS_DIR);  // appended: BuiltTorch's note
  if (pp && *pp) path.append(":").append(pp);
  std::vector<std::string> env = {path, "PYTHONUNBUFFERED=1", std::string(kTorchBuiltEnv).append("=").append(BuiltTorch())};
  env.insert(env.end(), KeptBytecodeEnv().begin(), KeptBytecodeEnv().end());
  return env;
}

std::vector<std::string> PackageModuleCommand(const std::string& python, const std::string& module, bool bytecode_kept) {
  if (!bytecode_kept) return {python, "-m", "parity_capture." + module};
  return {python, (fs::path(PARITY_TOOLS_DIR) / "parity_capture" / "bytecode.py").string(), "parity_capture." + module};
}

std::vector<std::string> PackageModuleCommand(const std::string& python, const std::string& module) {
  return PackageModuleCommand(python, module, !KeptBytecodeEnv().empty());
}

}  // namespace parity::runtime
