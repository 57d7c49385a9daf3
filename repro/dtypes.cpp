#include "repro/dtypes.h"

namespace parity::ir {

namespace {

struct DtypeName {
  const char* torch;
  const char* shortname;
  c10::ScalarType type;
};

constexpr DtypeName kDtypeNames[] = {
    {"float32", "f32", c10::ScalarType::Float},
    {"float64", "f64", c10::ScalarType::Double},
    {"float16", "f16", c10::ScalarType::Half},
    {"bfloat16", "bf16", c10::ScalarType::BFloat16},
    {"int64", "i64", c10::ScalarType::Long},
    {"int32", "i32", c10::ScalarType::Int},
    {"int16", "i16", c10::ScalarType::Short},
    {"int8", "i8", c10::ScalarType::Char},
    {"uint8", "u8", c10::ScalarType::Byte},
    {"uint16", "u16", c10::ScalarType::UInt16},
    {"uint32", "u32", c10::ScalarType::UInt32},
    {"uint64", "u64", c10::ScalarType::UInt64},
    {"bool", "b8", c10::ScalarType::Bool},
    {"complex64", "c64", c10::ScalarType::ComplexFloat},
    {"complex128", "c128", c10::ScalarType::ComplexDouble},
    {"complex32", "c32", c10::ScalarType::ComplexHalf},
    {"float8_e4m3fn", "f8e4m3", c10::ScalarType::Float8_e4m3fn},
    {"float8_e5m2", "f8e5m2", c10::ScalarType::Float8_e5m2},
};

}  // namespace

Expected<c10::ScalarType> ParseTorchDtype(const std::string& name) {
  std::string n = name.rfind("torch.", 0) == 0 ? name.substr(6) : name;
  for (const auto& d : kDtypeNames)
    if (n == d.torch) return d.type;
  return Error::BadInput("unknown dtype \"" + name + "\"");
}

std::string TorchDtypeName(c10::ScalarType t) {
  for (const auto& d : kDtypeNames)
    if (t == d.type) return d.torch;
  return c10::toString(t);
}

std::string ShortDtypeName(c10::ScalarType t) {
  for (const auto& d : kDtypeNames)
    if (t == d.type) return d.shortname;
  return c10::toString(t);
}

}  // namespace parity::ir
