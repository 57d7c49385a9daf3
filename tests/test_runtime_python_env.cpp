// Where parity's Python processes keep bytecode (runtime/python_env.h): in parity's cache only when
// the torch package has none beside it and Python may not write it there; never over the caller's
// own PYTHONPYCACHEPREFIX.
#include "runtime/python_env.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>

#include "test_helpers.h"

namespace parity::runtime {
namespace {

namespace fs = std::filesystem;

std::function<std::optional<std::string>(const char*)> Env(std::map<std::string, std::string> vars) {
  return [vars](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(PythonEnv, BytecodeGoesToParitysCacheWhenTorchHasNoneAndPythonMayNotWriteIt) {
  testing::TempDir tmp;
  const fs::path torch_dir = tmp.path() / "torch";
  fs::create_directories(torch_dir);
  std::ofstream(torch_dir / "__init__.py") << "\n";
  const fs::path cache = tmp.path() / "cache";
  const std::vector<std::string> kept = {"PYTHONPYCACHEPREFIX=" + (cache / "pycache").string(), "PYTHONDONTWRITEBYTECODE="};

  EXPECT_EQ(BytecodeCacheEnv(torch_dir, Env({{"PYTHONDONTWRITEBYTECODE", "1"}}), cache), kept);
  // Python may write it beside the sources (the first import does): nothing changes.
  EXPECT_TRUE(BytecodeCacheEnv(torch_dir, Env({}), cache).empty());
  EXPECT_TRUE(BytecodeCacheEnv(torch_dir, Env({{"PYTHONDONTWRITEBYTECODE", ""}}), cache).empty());
  // The caller chose where bytecode goes.
  EXPECT_TRUE(BytecodeCacheEnv(torch_dir, Env({{"PYTHONDONTWRITEBYTECODE", "1"}, {"PYTHONPYCACHEPREFIX", "/mine"}}), cache).empty());
  // No torch package known.
  EXPECT_TRUE(BytecodeCacheEnv("", Env({{"PYTHONDONTWRITEBYTECODE", "1"}}), cache).empty());

  // Bytecode beside the sources (a pip install compiles it): Python reads it; nothing changes.
  fs::create_directories(torch_dir / "__pycache__");
  std::ofstream(torch_dir / "__pycache__" / "__init__.cpython-312.pyc") << "x";
  EXPECT_TRUE(BytecodeCacheEnv(torch_dir, Env({{"PYTHONDONTWRITEBYTECODE", "1"}}), cache).empty());
}

TEST(PythonEnv, TheLoadedTorchIsTheOneThisProcessRuns) {
  // This test binary links libtorch from the venv's wheel: its package holds __init__.py.
  const fs::path pkg = LoadedTorchPackage();
  ASSERT_FALSE(pkg.empty());
  EXPECT_TRUE(fs::exists(pkg / "__init__.py")) << pkg;
  EXPECT_TRUE(fs::exists(pkg / "lib" / "libc10.so")) << pkg;
}

TEST(PythonEnv, ParityCacheDirFollowsItsVariable) {
  const char* was = std::getenv("PARITY_CACHE_DIR");
  const std::optional<std::string> saved = was ? std::optional<std::string>(was) : std::nullopt;
  ::setenv("PARITY_CACHE_DIR", "/somewhere/parity", 1);
  EXPECT_EQ(ParityCacheDir(), fs::path("/somewhere/parity"));
  if (saved)
    ::setenv("PARITY_CACHE_DIR", saved->c_str(), 1);
  else
    ::unsetenv("PARITY_CACHE_DIR");
}

TEST(PythonEnv, PackageModulesRunThroughTheBytecodeScriptOnlyWhereParityKeepsTheBytecode) {
  EXPECT_EQ(PackageModuleCommand("py", "worker", false), (std::vector<std::string>{"py", "-m", "parity_capture.worker"}));
  const auto kept = PackageModuleCommand("py", "forkserver", true);
  ASSERT_EQ(kept.size(), 3u);
  EXPECT_EQ(kept[0], "py");
  EXPECT_EQ(std::filesystem::path(kept[1]).filename(), "bytecode.py");
  EXPECT_TRUE(std::filesystem::exists(kept[1])) << kept[1];  // the package's own script, run as a file
  EXPECT_EQ(kept[2], "parity_capture.forkserver");
}

}  // namespace
}  // namespace parity::runtime
