#include "repro/safetensors.h"

#include "util/digest.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/view_as_complex.h>
#include <ATen/ops/view_as_real.h>
#include <c10/core/ScalarType.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>

#include "util/files.h"

namespace parity::safetensors {
namespace fs = std::filesystem;
using nlohmann::json;

class Mapping {
 public:
  Mapping(void* data, size_t size) : data_(data), size_(size) {}
  ~Mapping() {
    if (data_ != nullptr && data_ != MAP_FAILED && size_ > 0) ::munmap(data_, size_);
  }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  const uint8_t* bytes() const { return static_cast<const uint8_t*>(data_); }
  uint8_t* mutable_bytes() { return static_cast<uint8_t*>(data_); }
  size_t size() const { return size_; }

 private:
  void* data_;
  size_t size_;
};

namespace {

struct DtypeEntry {
  const char* name;
  c10::ScalarType type;
};

constexpr DtypeEntry kDtypes[] = {
    {"BOOL", c10::ScalarType::Bool},
    {"U8", c10::ScalarType::Byte},
    {"I8", c10::ScalarType::Char},
    {"I16", c10::ScalarType::Short},
    {"U16", c10::ScalarType::UInt16},
    {"I32", c10::ScalarType::Int},
    {"U32", c10::ScalarType::UInt32},
    {"I64", c10::ScalarType::Long},
    {"U64", c10::ScalarType::UInt64},
    {"F16", c10::ScalarType::Half},
    {"BF16", c10::ScalarType::BFloat16},
    {"F32", c10::ScalarType::Float},
    {"F64", c10::ScalarType::Double},
    {"C64", c10::ScalarType::ComplexFloat},
    {"F8_E4M3", c10::ScalarType::Float8_e4m3fn},
    {"F8_E5M2", c10::ScalarType::Float8_e5m2},
};

bool MulOverflows(uint64_t a, uint64_t b, uint64_t* out) { return __builtin_mul_overflow(a, b, out); }

}  // namespace

Expected<c10::ScalarType> ParseDtype(const std::string& name) {
  for (const auto& e : kDtypes)
    if (name == e.name) return e.type;
  return Error::BadInput("unknown dtype \"" + name + "\"");
}

Expected<std::string> DtypeName(c10::ScalarType type) {
  for (const auto& e : kDtypes)
    if (type == e.type) return std::string(e.name);
  return Error::Unsupported(std::string("dtype ") + c10::toString(type) + " has no safetensors encoding");
}

namespace {

// The whole file, mapped copy-on-write (tensors view it without copying).
Expected<std::shared_ptr<Mapping>> MapFile(const fs::path& path) {
  const std::string where = path.string();
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);  // a FIFO must not block the open
  if (fd < 0) return Error::BadInput(where + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return Error::BadInput(where + ": cannot stat: " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Error::BadInput(where + ": not a regular file");
  }
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  if (file_size < 8) {
    ::close(fd);
    return Error::BadInput(where + ": header: file is " + std::to_string(file_size) +
                           " bytes, shorter than the 8-byte header length");
  }
  void* data = ::mmap(nullptr, file_size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (data == MAP_FAILED) return Error::BadInput(where + ": mmap failed: " + std::strerror(errno));
  return std::make_shared<Mapping>(data, file_size);
}

// The JSON header (an object without duplicate keys) and its length in bytes.
Expected<std::pair<json, uint64_t>> ReadHeader(const Mapping& mapping, const std::string& where) {
  const uint64_t file_size = mapping.size();
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | mapping.bytes()[i];
  if (header_len > kMaxHeaderBytes)
    return Error::BadInput(where + ": header: length " + std::to_string(header_len) + " exceeds the 100 MB limit");
  if (header_len > file_size - 8)
    return Error::BadInput(where + ": header: length " + std::to_string(header_len) + " runs past the end of the file (" +
                           std::to_string(file_size) + " bytes)");
  const char* hbegin = reinterpret_cast<const char*>(mapping.bytes() + 8);
  std::string header_text(hbegin, hbegin + header_len);
  // Duplicate keys are legal JSON to most parsers but ambiguous here: detect them while parsing.
  std::set<std::string> seen_keys;
  std::string duplicate;
  json::parser_callback_t cb = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key && depth == 1) {
      const auto& key = parsed.get_ref<const std::string&>();
      if (!seen_keys.insert(key).second && duplicate.empty()) duplicate = key;
    }
    return true;
  };
  json header = json::parse(header_text, cb, /*allow_exceptions=*/false);
  if (header.is_discarded()) return Error::BadInput(where + ": header: not valid JSON");
  if (!header.is_object()) return Error::BadInput(where + ": header: not a JSON object");
  if (!duplicate.empty()) return Error::BadInput(where + ": header: duplicate tensor name \"" + duplicate + "\"");
  return std::make_pair(std::move(header), header_len);
}

Status ReadMetadata(const json& entry, const std::string& where, std::map<std::string, std::string>& out) {
  if (!entry.is_object()) return Error::BadInput(where + ": header: __metadata__ is not an object");
  for (auto m = entry.begin(); m != entry.end(); ++m) {
    if (!m.value().is_string()) return Error::BadInput(where + ": header: __metadata__." + m.key() + " is not a string");
    out[m.key()] = m.value().get<std::string>();
  }
  return Status::Ok();
}

// The shape of a tensor entry, and its element count (overflow checked).
Expected<std::pair<std::vector<int64_t>, uint64_t>> ReadShape(const json& shape, const std::string& field) {
  if (!shape.is_array()) return Error::BadInput(field + ": field \"shape\" is not an array");
  std::vector<int64_t> dims;
  uint64_t numel = 1;
  for (const auto& d : shape) {
    if (!d.is_number_unsigned()) return Error::BadInput(field + ": field \"shape\" holds a non-integer or negative dim");
    uint64_t dim = d.get<uint64_t>();
    if (dim > (uint64_t{1} << 62) || MulOverflows(numel, dim, &numel))
      return Error::BadInput(field + ": field \"shape\": element count overflows");
    dims.push_back(static_cast<int64_t>(dim));
  }
  return std::make_pair(std::move(dims), numel);
}

// One tensor entry of the header, checked against the data section's size.
Expected<TensorInfo> ReadTensorEntry(const std::string& name, const json& entry, const std::string& where, uint64_t data_size) {
  const std::string field = where + ": tensor \"" + name + "\"";
  if (!entry.is_object()) return Error::BadInput(field + ": entry is not an object");
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!entry.contains(key)) return Error::BadInput(field + ": missing field \"" + key + "\"");
  if (!entry["dtype"].is_string()) return Error::BadInput(field + ": field \"dtype\" is not a string");
  auto dtype = ParseDtype(entry["dtype"].get<std::string>());
  if (!dtype.ok()) return dtype.error().With(field + ": field \"dtype\"");
  TensorInfo info;
  info.name = name;
  info.dtype = *dtype;
  info.stored = *dtype;
  PARITY_ASSIGN_OR_RETURN(auto shape, ReadShape(entry["shape"], field));
  info.shape = std::move(shape.first);
  const json& offs = entry["data_offsets"];
  if (!offs.is_array() || offs.size() != 2 || !offs[0].is_number_unsigned() || !offs[1].is_number_unsigned())
    return Error::BadInput(field + ": field \"data_offsets\" is not a pair of non-negative integers");
  info.begin = offs[0].get<uint64_t>();
  info.end = offs[1].get<uint64_t>();
  if (info.end < info.begin) return Error::BadInput(field + ": field \"data_offsets\": end before begin");
  uint64_t nbytes = 0;
  if (MulOverflows(shape.second, c10::elementSize(info.dtype), &nbytes))
    return Error::BadInput(field + ": byte length overflows");
  if (nbytes != info.end - info.begin)
    return Error::BadInput(field + ": field \"data_offsets\" spans " + std::to_string(info.end - info.begin) +
                           " bytes but shape x dtype needs " + std::to_string(nbytes));
  if (info.end > data_size)
    return Error::BadInput(field + ": field \"data_offsets\" ends at " + std::to_string(info.end) + ", past the data section (" +
                           std::to_string(data_size) + " bytes)");
  return info;
}

// The complex tensors stored as their real view (kComplexMetadata) become complex again: each
// named tensor must exist, be F64 (complex128) or F16 (complex32) and end in a dim of 2.
Status ApplyComplexMetadata(const std::map<std::string, std::string>& metadata, const std::string& where,
                            std::vector<TensorInfo>& infos) {
  auto it = metadata.find(kComplexMetadata);
  if (it == metadata.end()) return Status::Ok();
  const std::string field = where + ": header: __metadata__." + kComplexMetadata;
  json j = json::parse(it->second, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Error::BadInput(field + ": not a JSON object");
  for (auto e = j.begin(); e != j.end(); ++e) {
    const std::string f = field + "." + e.key();
    auto info = std::find_if(infos.begin(), infos.end(), [&](const TensorInfo& i) { return i.name == e.key(); });
    if (info == infos.end()) return Error::BadInput(f + ": no such tensor");
    const bool c128 = e.value() == "complex128", c32 = e.value() == "complex32";
    if (!c128 && !c32) return Error::BadInput(f + ": expected \"complex128\" or \"complex32\"");
    const c10::ScalarType real = c128 ? c10::ScalarType::Double : c10::ScalarType::Half;
    if (info->stored != real || info->shape.empty() || info->shape.back() != 2)
      return Error::BadInput(f + ": the tensor must be " + (c128 ? "F64" : "F16") + " with a last dim of 2");
    info->dtype = c128 ? c10::ScalarType::ComplexDouble : c10::ScalarType::ComplexHalf;
    info->shape.pop_back();
  }
  return Status::Ok();
}

// Offsets must tile the data section: sorted, contiguous, non-overlapping, complete.
Status CheckTiling(const std::vector<TensorInfo>& infos, const std::string& where, uint64_t data_size) {
  std::vector<const TensorInfo*> by_offset;
  for (const auto& i : infos) by_offset.push_back(&i);
  std::stable_sort(by_offset.begin(), by_offset.end(), [](const TensorInfo* a, const TensorInfo* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t cursor = 0;
  for (const TensorInfo* i : by_offset) {
    if (i->begin < cursor)
      return Error::BadInput(where + ": tensor \"" + i->name + "\": field \"data_offsets\" overlaps the previous tensor");
    if (i->begin > cursor)
      return Error::BadInput(where + ": tensor \"" + i->name + "\": field \"data_offsets\" leaves a gap of " +
                             std::to_string(i->begin - cursor) + " bytes before it");
    cursor = i->end;
  }
  if (cursor != data_size)
    return Error::BadInput(where + ": data section is " + std::to_string(data_size) + " bytes but the tensors cover " +
                           std::to_string(cursor));
  return Status::Ok();
}

}  // namespace

std::string File::Sha256() const {
  return Sha256Hex(std::string_view(reinterpret_cast<const char*>(mapping_->bytes()), mapping_->size()));
}

Expected<File> File::Open(const fs::path& path) {
  const std::string where = path.string();
  PARITY_ASSIGN_OR_RETURN(std::shared_ptr<Mapping> mapping, MapFile(path));
  PARITY_ASSIGN_OR_RETURN(auto header, ReadHeader(*mapping, where));
  File file;
  file.path_ = path;
  file.data_start_ = 8 + header.second;
  const uint64_t data_size = mapping->size() - file.data_start_;
  for (auto it = header.first.begin(); it != header.first.end(); ++it) {
    if (it.key() == "__metadata__") {
      PARITY_RETURN_IF_ERROR(ReadMetadata(it.value(), where, file.metadata_));
      continue;
    }
    PARITY_ASSIGN_OR_RETURN(TensorInfo info, ReadTensorEntry(it.key(), it.value(), where, data_size));
    file.infos_.push_back(std::move(info));
  }
  PARITY_RETURN_IF_ERROR(CheckTiling(file.infos_, where, data_size));
  PARITY_RETURN_IF_ERROR(ApplyComplexMetadata(file.metadata_, where, file.infos_));
  std::sort(file.infos_.begin(), file.infos_.end(), [](const TensorInfo& a, const TensorInfo& b) { return a.begin < b.begin; });
  for (size_t k = 0; k < file.infos_.size(); ++k) file.index_[file.infos_[k].name] = k;
  file.mapping_ = std::move(mapping);
  return file;
}

Expected<at::Tensor> File::Get(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end()) return Error::BadInput(path_.string() + ": no tensor named \"" + name + "\"");
  const TensorInfo& info = infos_[it->second];
  uint8_t* ptr = mapping_->mutable_bytes() + data_start_ + info.begin;
  const size_t item = c10::elementSize(info.stored);
  const bool as_real = info.stored != info.dtype;  // a complex tensor stored as its real view
  std::vector<int64_t> shape = info.shape;
  if (as_real) shape.push_back(2);
  auto options = at::TensorOptions().dtype(info.stored).device(at::kCPU);
  at::Tensor out;
  if (reinterpret_cast<uintptr_t>(ptr) % item == 0 && info.end > info.begin) {
    std::shared_ptr<Mapping> keep = mapping_;
    out = at::from_blob(
        ptr, shape, [keep](void*) {}, options);
  } else {
    out = at::empty(shape, options);
    if (info.end > info.begin) std::memcpy(out.data_ptr(), ptr, info.end - info.begin);
  }
  return as_real ? at::view_as_complex(out) : out;
}

Expected<std::vector<std::pair<std::string, at::Tensor>>> LoadAll(const fs::path& path) {
  auto file = File::Open(path);
  if (!file.ok()) return file.error();
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& info : file->tensors()) {
    auto t = file->Get(info.name);
    if (!t.ok()) return t.error();
    out.emplace_back(info.name, std::move(*t));
  }
  return out;
}

Status Save(const fs::path& path, const std::vector<std::pair<std::string, at::Tensor>>& tensors,
            const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  std::map<std::string, std::string> meta = metadata;
  json complex = json::object();
  std::vector<at::Tensor> contiguous;
  uint64_t offset = 0;
  std::set<std::string> names;
  for (const auto& [name, tensor] : tensors) {
    if (!names.insert(name).second) return Error::BadInput(path.string() + ": duplicate tensor name \"" + name + "\"");
    at::Tensor t = tensor.detach().to(at::kCPU).contiguous();
    if (t.scalar_type() == c10::ScalarType::ComplexDouble || t.scalar_type() == c10::ScalarType::ComplexHalf) {
      complex[name] = t.scalar_type() == c10::ScalarType::ComplexDouble ? "complex128" : "complex32";
      t = at::view_as_real(t).contiguous();
    }
    auto dname = DtypeName(t.scalar_type());
    if (!dname.ok()) return dname.error().With(path.string() + ": tensor \"" + name + "\"");
    const uint64_t nbytes = t.numel() * t.element_size();
    header[name] = {{"dtype", *dname}, {"shape", t.sizes().vec()}, {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
    contiguous.push_back(std::move(t));
  }
  if (!complex.empty()) meta[kComplexMetadata] = complex.dump();
  if (!meta.empty()) header["__metadata__"] = meta;
  std::string text = header.dump();
  while ((text.size() % 8) != 0) text.push_back(' ');
  std::string blob;
  blob.reserve(8 + text.size() + offset);
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) blob.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  blob += text;
  for (const auto& t : contiguous) blob.append(static_cast<const char*>(t.data_ptr()), t.numel() * t.element_size());
  return WriteFileAtomic(path, blob);
}

}  // namespace parity::safetensors
