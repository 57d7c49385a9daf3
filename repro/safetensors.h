// safetensors files: a strict reader (mmap, zero-copy where aligned) and a writer.
//
// Layout: 8-byte little-endian header length N, N bytes of UTF-8 JSON
// ({name: {dtype, shape, data_offsets: [begin, end)}, "__metadata__": {str: str}}), then the
// data section. The reader enforces what the reference implementation does: header at most
// 100 MB, known dtypes, no duplicate names, byte length = numel x itemsize (overflow checked),
// offsets sorted, contiguous, non-overlapping and covering the data section exactly.
//
// safetensors has no complex128 or complex32: parity stores such a tensor as its real view
// (F64 or F16 with a trailing dim of 2) and names it in the metadata entry "parity.complex"
// (a JSON object, tensor name -> "complex128" | "complex32"); the reader gives it back complex.
#pragma once

#include <ATen/core/Tensor.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "util/status.h"

namespace parity::safetensors {

inline constexpr uint64_t kMaxHeaderBytes = 100'000'000;

inline constexpr const char* kComplexMetadata = "parity.complex";

struct TensorInfo {
  std::string name;
  c10::ScalarType dtype;       // the tensor's own (complex for one stored as its real view)
  std::vector<int64_t> shape;  // likewise
  c10::ScalarType stored;      // the file's entry: `dtype`, or the real dtype of a stored complex
  uint64_t begin = 0;  // relative to the data section
  uint64_t end = 0;
};

class Mapping;  // the mmapped file, shared by every tensor viewing it

class File {
 public:
  [[nodiscard]] static Expected<File> Open(const std::filesystem::path& path);

  const std::filesystem::path& path() const { return path_; }
  const std::vector<TensorInfo>& tensors() const { return infos_; }  // in file order
  std::string Sha256() const;  // of the whole file, as mapped at Open
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  bool contains(const std::string& name) const { return index_.count(name) != 0; }
  // A CPU tensor viewing the file (copy-on-write) when the data is aligned, else a copy.
  [[nodiscard]] Expected<at::Tensor> Get(const std::string& name) const;

 private:
  std::filesystem::path path_;
  std::shared_ptr<Mapping> mapping_;
  std::vector<TensorInfo> infos_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
  uint64_t data_start_ = 0;
};

// Loads every tensor of a file, in file order.
[[nodiscard]] Expected<std::vector<std::pair<std::string, at::Tensor>>> LoadAll(const std::filesystem::path& path);

// Writes tensors (any device, any strides: stored contiguous, on CPU) atomically.
[[nodiscard]] Status Save(const std::filesystem::path& path, const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                          const std::map<std::string, std::string>& metadata = {});

// safetensors dtype names ("F32", "BF16", ...).
[[nodiscard]] Expected<c10::ScalarType> ParseDtype(const std::string& name);
[[nodiscard]] Expected<std::string> DtypeName(c10::ScalarType type);

}  // namespace parity::safetensors
