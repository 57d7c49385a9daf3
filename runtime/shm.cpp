#include "runtime/shm.h"

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

nlohmann::json WriteTensors(const ShmSegment& seg, const ShmLayout& layout, const std::vector<at::Tensor>& tensors) {
  nlohmann::json out = nlohmann::json::array();
  for (size_t k = 0; k < tensors.size(); ++k) {
    const at::Tensor& t = tensors[k];
    if (t.nbytes() > 0) std::memcpy(seg.data() + layout.offsets[k], t.const_data_ptr(), t.nbytes());
    out.push_back({{"dtype", ir::TorchDtypeName(t.scalar_type())}, {"shape", t.sizes().vec()}, {"offset", layout.offsets[k]}});
  }
  return out;
}

namespace {
bool Free(const at::Tensor& t) { return t.use_count() == 1 && t.storage().use_count() == 1; }
}  // namespace

at::Tensor TensorPool::Take(c10::IntArrayRef shape, c10::ScalarType dtype) {
  for (const at::Tensor& t : kept_)
    if (t.scalar_type() == dtype && t.sizes() == shape && Free(t)) return t;
  at::Tensor t = at::empty(shape, at::TensorOptions().dtype(dtype));
  if (kept_.size() >= capacity_) {
    auto it = std::find_if(kept_.begin(), kept_.end(), Free);  // drop a free one, else keep none new
    if (it == kept_.end()) return t;
    kept_.erase(it);
  }
  kept_.push_back(t);
  return t;
}

Expected<std::vector<at::Tensor>> ReadTensors(const ShmSegment& seg, const nlohmann::json& described, const std::string& what,
                                              TensorPool* pool) {
  std::vector<at::Tensor> out;
  if (!described.is_array()) return Error::BadInput(what + ": \"outputs\" is not a list");
  for (size_t k = 0; k < described.size(); ++k) {
    const auto& d = described[k];
    const std::string where = what + ": outputs[" + std::to_string(k) + "]";
    if (!d.is_object() || !d.contains("dtype") || !d.contains("shape") || !d.contains("offset") || !d["offset"].is_number_unsigned())
      return Error::BadInput(where + ": expected {dtype, shape, offset}");
    PARITY_ASSIGN_OR_RETURN(c10::ScalarType dtype, ir::ParseTorchDtype(d["dtype"].get<std::string>()));
    const auto shape = d["shape"].get<std::vector<int64_t>>();
    at::Tensor t = pool ? pool->Take(shape, dtype) : at::empty(shape, at::TensorOptions().dtype(dtype));
    const size_t offset = d["offset"].get<size_t>();
    if (offset > seg.size() || t.nbytes() > seg.size() - offset)
      return Error::BadInput(where + ": bytes [" + std::to_string(offset) + ", +" + std::to_string(t.nbytes()) +
                             ") lie outside segment " + seg.path() + " of " + std::to_string(seg.size()) + " bytes");
    if (t.nbytes() > 0) std::memcpy(t.mutable_data_ptr(), seg.data() + offset, t.nbytes());
    out.push_back(std::move(t));
  }
  return out;
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
