#include "runtime/shm.h"

#include <c10/core/InferenceMode.h>

#include <ATen/ops/empty.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "repro/graph_json.h"

namespace parity::runtime {
namespace fs = std::filesystem;

namespace {

constexpr size_t kAlign = 64;
constexpr const char* kPrefix = "parity-shm-";

fs::path ShmDir() { return fs::is_directory("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path(); }

size_t Aligned(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

}  // namespace

ShmSegment& ShmSegment::operator=(ShmSegment&& o) noexcept {
  if (this != &o) {
    Release();
    path_ = std::move(o.path_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    owned_ = std::exchange(o.owned_, false);
  }
  return *this;
}

ShmSegment::~ShmSegment() { Release(); }

void ShmSegment::Release() {
  if (data_) ::munmap(data_, size_);
  if (owned_) ::unlink(path_.c_str());
  data_ = nullptr;
  size_ = 0;
  owned_ = false;
}

Expected<ShmSegment> ShmSegment::Create(size_t bytes) {
  static std::atomic<int> serial{0};
  SweepStaleSegments();
  const size_t size = std::max<size_t>(Aligned(bytes), 1 << 16);
  ShmSegment s;
  s.path_ = (ShmDir() / (std::string(kPrefix) + std::to_string(::getpid()) + "-" + std::to_string(serial++))).string();
  const int fd = ::open(s.path_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return Error::Runtime("shared memory " + s.path_ + ": " + std::strerror(errno));
  s.owned_ = true;  // from here on the destructor removes the file
  if (::ftruncate(fd, static_cast<off_t>(size)) != 0) {
    const int err = errno;
    ::close(fd);
    return Error::Runtime("shared memory " + s.path_ + ": cannot size it to " + std::to_string(size) + " bytes: " + std::strerror(err));
  }
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) return Error::Runtime("shared memory " + s.path_ + ": mmap: " + std::strerror(errno));
  s.data_ = static_cast<uint8_t*>(p);
  s.size_ = size;
  return s;
}

Expected<ShmSegment> ShmSegment::Open(const std::string& path, size_t size) {
  if (fs::path(path).filename().string().rfind(kPrefix, 0) != 0)
    return Error::BadInput("shared memory: \"" + path + "\" is not a parity segment");
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return Error::Runtime("shared memory " + path + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < size) {
    ::close(fd);
    return Error::Runtime("shared memory " + path + ": smaller than the " + std::to_string(size) + " bytes announced");
  }
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) return Error::Runtime("shared memory " + path + ": mmap: " + std::strerror(errno));
  ShmSegment s;
  s.path_ = path;
  s.data_ = static_cast<uint8_t*>(p);
  s.size_ = size;
  return s;
}

ShmLayout LayOut(const std::vector<at::Tensor>& tensors) {
  ShmLayout l;
  for (const auto& t : tensors) {
    l.offsets.push_back(l.bytes);
    l.bytes += Aligned(t.nbytes());
  }
  return l;
}

namespace {
void CopyBytes(void* dst, const void* src, size_t n) {
  if (n > 0) std::memcpy(dst, src, n);
}
}  // namespace

void CopyTensors(const ShmSegment& seg, const ShmLayout& layout, const std::vector<at::Tensor>& tensors) {
  for (size_t k = 0; k < tensors.size(); ++k)
    CopyBytes(seg.data() + layout.offsets[k], tensors[k].const_data_ptr(), tensors[k].nbytes());
}

nlohmann::json DescribeTensors(const ShmLayout& layout, const std::vector<at::Tensor>& tensors) {
  nlohmann::json out = nlohmann::json::array();
  for (size_t k = 0; k < tensors.size(); ++k)
    out.push_back({{"dtype", ir::TorchDtypeName(tensors[k].scalar_type())},
                   {"shape", tensors[k].sizes().vec()},
                   {"offset", layout.offsets[k]}});
  return out;
}

nlohmann::json WriteTensors(const ShmSegment& seg, const ShmLayout& layout, const std::vector<at::Tensor>& tensors) {
  CopyTensors(seg, layout, tensors);
  return DescribeTensors(layout, tensors);
}

namespace {
bool Free(const at::Tensor& t) { return t.use_count() == 1 && t.storage().use_count() == 1; }
}  // namespace

at::Tensor TensorPool::Take(c10::IntArrayRef shape, c10::ScalarType dtype) {
  // A tensor made under InferenceMode is an inference tensor, which autograd refuses to save: a
  // kept one is handed out only in the mode it was made in (an eval run's, then a train run's).
  const bool inference = c10::InferenceMode::is_enabled();
  for (const at::Tensor& t : kept_)
    if (t.scalar_type() == dtype && t.sizes() == shape && t.is_inference() == inference && Free(t)) return t;
  at::Tensor t = at::empty(shape, at::TensorOptions().dtype(dtype));
  if (kept_.size() >= capacity_) {
    auto it = std::find_if(kept_.begin(), kept_.end(), Free);  // drop a free one, else keep none new
    if (it == kept_.end()) return t;
    kept_.erase(it);
  }
  kept_.push_back(t);
  return t;
}

Expected<std::vector<ShmTensor>> ParseTensors(const nlohmann::json& described, const std::string& what) {
  std::vector<ShmTensor> out;
  if (!described.is_array()) return Error::BadInput(what + ": \"outputs\" is not a list");
  for (size_t k = 0; k < described.size(); ++k) {
    const auto& d = described[k];
    const std::string where = what + ": outputs[" + std::to_string(k) + "]";
    if (!d.is_object() || !d.contains("dtype") || !d["dtype"].is_string() || !d.contains("shape") || !d["shape"].is_array() ||
        !d.contains("offset") || !d["offset"].is_number_unsigned())
      return Error::BadInput(where + ": expected {dtype, shape, offset}");
    ShmTensor t;
    PARITY_ASSIGN_OR_RETURN(t.dtype, ir::ParseTorchDtype(d["dtype"].get<std::string>()));
    for (const auto& s : d["shape"]) {
      if (!s.is_number_integer() || s.get<int64_t>() < 0)
        return Error::BadInput(where + ": \"shape\" holds " + s.dump() + ", not a size");
      t.shape.push_back(s.get<int64_t>());
    }
    t.offset = d["offset"].get<size_t>();
    out.push_back(std::move(t));
  }
  return out;
}

Expected<std::vector<at::Tensor>> ReadTensors(const ShmSegment& seg, const std::vector<ShmTensor>& described,
                                              const std::string& what, TensorPool* pool) {
  std::vector<at::Tensor> out;
  out.reserve(described.size());
  for (size_t k = 0; k < described.size(); ++k) {
    const ShmTensor& d = described[k];
    size_t bytes = c10::elementSize(d.dtype);
    for (int64_t s : d.shape)
      if (__builtin_mul_overflow(bytes, static_cast<size_t>(s), &bytes)) bytes = SIZE_MAX;
    if (d.offset > seg.size() || bytes > seg.size() - d.offset)
      return Error::BadInput(what + ": outputs[" + std::to_string(k) + "]: bytes [" + std::to_string(d.offset) + ", +" +
                             std::to_string(bytes) + ") lie outside segment " + seg.path() + " of " +
                             std::to_string(seg.size()) + " bytes");
    at::Tensor t = pool ? pool->Take(d.shape, d.dtype) : at::empty(d.shape, at::TensorOptions().dtype(d.dtype));
    CopyBytes(t.mutable_data_ptr(), seg.data() + d.offset, bytes);
    out.push_back(std::move(t));
  }
  return out;
}

Expected<std::vector<at::Tensor>> ReadTensors(const ShmSegment& seg, const nlohmann::json& described, const std::string& what,
                                              TensorPool* pool) {
  PARITY_ASSIGN_OR_RETURN(auto parsed, ParseTensors(described, what));
  return ReadTensors(seg, parsed, what, pool);
}

int SweepStaleSegments() {
  int removed = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(ShmDir(), ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(kPrefix, 0) != 0) continue;
    const std::string rest = name.substr(std::strlen(kPrefix));
    const auto dash = rest.find('-');
    if (dash == std::string::npos) continue;
    pid_t pid = 0;
    try {
      pid = static_cast<pid_t>(std::stol(rest.substr(0, dash)));
    } catch (const std::exception&) {
      continue;
    }
    if (pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH && fs::remove(e.path(), ec)) ++removed;
  }
  return removed;
}

}  // namespace parity::runtime
