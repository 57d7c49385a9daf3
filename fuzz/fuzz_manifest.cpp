// The repro-dir loader on an arbitrary manifest.json. The rest of the dir (graphs/ and the
// tensors file) is a copy of a real capture named by $PARITY_FUZZ_REPRO, made once per process,
// so a mutated manifest can reach graph loading, tensor lookup and the digest check.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "fuzz/fuzz_util.h"
#include "repro/repro_dir.h"

namespace fs = std::filesystem;

namespace {

const fs::path& ReproCopy() {
  static const fs::path dir = [] {
    const char* src = std::getenv("PARITY_FUZZ_REPRO");
    if (src == nullptr || !fs::is_directory(src)) {
      std::fprintf(stderr, "fuzz_manifest: set PARITY_FUZZ_REPRO to a repro dir (e.g. testdata/models/mlp)\n");
      std::exit(2);
    }
    fs::path d = parity::fuzz::ScratchDir() / "repro";
    fs::remove_all(d);
    fs::copy(src, d, fs::copy_options::recursive);
    return d;
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const fs::path& dir = ReproCopy();
  parity::fuzz::WriteBytes(dir / "manifest.json", data, size);
  auto repro = parity::ReproDir::Load(dir);
  if (!repro.ok()) {
    if (repro.error().kind == parity::ErrorKind::kInternal) __builtin_trap();
    return 0;
  }
  for (const auto& g : repro->graphs()) {
    // Lookups may fail (a key naming no tensor) but only as errors, never a crash.
    (void)repro->Inputs(g);
    (void)repro->Attrs(g);
    (void)repro->ExpectedOutputs(g);
  }
  (void)parity::ManifestToJson(repro->manifest(), {});
  return 0;
}
