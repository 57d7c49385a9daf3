// The safetensors reader on arbitrary bytes: File::Open (header, dtypes, shapes, offsets) and
// every tensor it then hands out. Any outcome but a value or a kBadInput error is a finding.
#include <cstdint>

#include "fuzz/fuzz_util.h"
#include "repro/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto path = parity::fuzz::ScratchDir() / "input.safetensors";
  parity::fuzz::WriteBytes(path, data, size);
  auto file = parity::safetensors::File::Open(path);
  if (!file.ok()) {
    if (file.error().kind != parity::ErrorKind::kBadInput) __builtin_trap();
    return 0;
  }
  for (const auto& info : file->tensors()) {
    auto t = file->Get(info.name);
    if (!t.ok()) __builtin_trap();  // every tensor Open accepted must be readable
    // Read every byte the view claims (ASan reports any that lie outside the mapping).
    const auto* bytes = static_cast<const uint8_t*>(t->data_ptr());
    uint8_t acc = 0;
    for (size_t i = 0; i < t->nbytes(); ++i) acc ^= bytes[i];
    asm volatile("" : : "r"(acc));
  }
  (void)file->Sha256();
  return 0;
}
