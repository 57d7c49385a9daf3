// Shared-memory segments for tensors crossing to and from the Python worker (host ops): a file
// in /dev/shm (the temp dir where there is none) both processes map. Each side writes only the
// segment it owns (parity: the arguments; the worker: the results) and names it in the request
// or answer as {"path", "size"}; tensors in it are described by dtype, shape and byte offset
// (docs/worker.md). A segment is named parity-shm-<pid of its owner>-<n>; segments whose owner
// is gone (a child killed at its deadline) are removed the next time a segment is created.
#pragma once

#include <ATen/core/Tensor.h>
#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "util/status.h"

namespace parity::runtime {

// A mapping of a segment file, read-write; unmapped on destruction. An owned segment also
// removes its file.
class ShmSegment {
 public:
  ShmSegment() = default;
  ShmSegment(ShmSegment&& o) noexcept { *this = std::move(o); }
  ShmSegment& operator=(ShmSegment&& o) noexcept;
  ~ShmSegment();

  // A new segment of at least `bytes`, owned by this process.
  [[nodiscard]] static Expected<ShmSegment> Create(size_t bytes);
  // Maps another process's segment (`size` bytes).
  [[nodiscard]] static Expected<ShmSegment> Open(const std::string& path, size_t size);

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  bool valid() const { return data_ != nullptr; }
  nlohmann::json Describe() const { return {{"path", path_}, {"size", size_}}; }

 private:
  void Release();  // unmaps; removes the file of an owned segment
  std::string path_;
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool owned_ = false;
};

// Tensors laid out in a segment: each contiguous, at a 64-byte aligned offset.
struct ShmLayout {
  std::vector<size_t> offsets;
  size_t bytes = 0;  // the segment size they need
};
ShmLayout LayOut(const std::vector<at::Tensor>& tensors);

// Copies `tensors` (CPU, contiguous) into `seg` at `layout`.
void CopyTensors(const ShmSegment& seg, const ShmLayout& layout, const std::vector<at::Tensor>& tensors);
// Their descriptions [{"dtype", "shape", "offset"}] in order.
nlohmann::json DescribeTensors(const ShmLayout& layout, const std::vector<at::Tensor>& tensors);
// CopyTensors, then DescribeTensors.
nlohmann::json WriteTensors(const ShmSegment& seg, const ShmLayout& layout, const std::vector<at::Tensor>& tensors);

// A tensor's place in a segment, as a request or an answer describes it.
struct ShmTensor {
  c10::ScalarType dtype;
  std::vector<int64_t> shape;
  size_t offset = 0;
};

// `described` ([{"dtype", "shape", "offset"}]) parsed. BadInput naming `what` and the entry when
// one is malformed or names an unknown dtype.
[[nodiscard]] Expected<std::vector<ShmTensor>> ParseTensors(const nlohmann::json& described, const std::string& what);

// Result tensors handed out earlier, refilled instead of allocated anew once nobody else holds
// them (no tensor and no view of their storage): a host op called in a loop allocates its results
// once, not per call (a fresh large allocation page-faults on every touch). Holds at most
// `capacity` tensors alive. A kept tensor is handed out only in the InferenceMode it was made in.
class TensorPool {
 public:
  explicit TensorPool(size_t capacity = 8) : capacity_(capacity) {}
  // A tensor of `shape` and `dtype`, contents unspecified: a free kept one, else a new one (kept).
  at::Tensor Take(c10::IntArrayRef shape, c10::ScalarType dtype);
  size_t size() const { return kept_.size(); }

 private:
  size_t capacity_;
  std::vector<at::Tensor> kept_;
};

// The tensors `described` in `seg`, copied out (so the segment can be reused), into tensors of
// `pool` when given. BadInput naming `what` and the entry when one lies outside the segment.
[[nodiscard]] Expected<std::vector<at::Tensor>> ReadTensors(const ShmSegment& seg, const std::vector<ShmTensor>& described,
                                                            const std::string& what, TensorPool* pool = nullptr);
// ParseTensors, then ReadTensors.
[[nodiscard]] Expected<std::vector<at::Tensor>> ReadTensors(const ShmSegment& seg, const nlohmann::json& described,
                                                            const std::string& what, TensorPool* pool = nullptr);

// Removes parity-shm-<pid>-* segments whose process is gone. Returns how many.
int SweepStaleSegments();

}  // namespace parity::runtime
