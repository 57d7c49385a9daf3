#include "repro/safetensors.h"

#include <ATen/ops/arange.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/view_as_real.h>
#include <gtest/gtest.h>

#include "test_helpers.h"

namespace parity::safetensors {
namespace {

using parity::testing::FailsWith;
using parity::testing::TempDir;

std::string Craft(const std::string& header, const std::string& data, int64_t claimed_len = -1) {
  uint64_t n = claimed_len >= 0 ? static_cast<uint64_t>(claimed_len) : header.size();
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  return out + header + data;
}

Expected<File> OpenBytes(const TempDir& dir, const std::string& bytes) {
  auto p = dir / "t.safetensors";
  parity::testing::Spit(p, bytes);
  return File::Open(p);
}

TEST(Safetensors, RoundTripsEveryDtype) {
  TempDir dir;
  std::vector<std::pair<std::string, at::Tensor>> ts;
  for (auto t :
       {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16, at::kLong, at::kInt, at::kShort, at::kChar, at::kByte, at::kBool}) {
    ts.emplace_back(std::string("t_") + c10::toString(t), at::arange(12).reshape({3, 4}).to(t));
  }
  ts.emplace_back("scalar", at::randn({}));
  ts.emplace_back("empty", at::randn({0, 5}));
  ts.emplace_back("strided", at::randn({4, 6}).t());
  ASSERT_TRUE(Save(dir / "a.safetensors", ts, {{"k", "v"}}).ok());
  auto f = File::Open(dir / "a.safetensors");
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f->metadata().at("k"), "v");
  ASSERT_EQ(f->tensors().size(), ts.size());
  for (const auto& [name, t] : ts) {
    auto got = f->Get(name);
    ASSERT_TRUE(got.ok());
    EXPECT_EQ(got->scalar_type(), t.scalar_type()) << name;
    EXPECT_TRUE(at::equal(*got, t.contiguous())) << name;
  }
}

// safetensors has no complex128 or complex32: they are stored as their real view and named in
// the metadata, and come back complex; complex64 is safetensors' own C64.
TEST(Safetensors, ComplexDtypesRoundTrip) {
  TempDir dir;
  const at::Tensor c128 = at::randn({3, 4}, at::kComplexDouble);
  const at::Tensor c64 = at::randn({5}, at::kComplexFloat);
  const at::Tensor c32 = at::randn({2, 3}, at::kComplexFloat).to(at::kComplexHalf);
  ASSERT_TRUE(Save(dir / "c.safetensors", {{"c128", c128}, {"c64", c64}, {"c32", c32}}, {{"k", "v"}}).ok());
  auto f = File::Open(dir / "c.safetensors");
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f->metadata().at("k"), "v");
  for (const auto& [name, t] : std::vector<std::pair<std::string, at::Tensor>>{{"c128", c128}, {"c64", c64}, {"c32", c32}}) {
    auto got = f->Get(name);
    ASSERT_TRUE(got.ok()) << name;
    EXPECT_EQ(got->scalar_type(), t.scalar_type()) << name;
    EXPECT_EQ(got->sizes(), t.sizes()) << name;
    EXPECT_TRUE(at::equal(at::view_as_real(*got), at::view_as_real(t))) << name;
  }
  const auto& infos = f->tensors();
  auto info = std::find_if(infos.begin(), infos.end(), [](const TensorInfo& i) { return i.name == "c128"; });
  EXPECT_EQ(info->dtype, at::kComplexDouble);
  EXPECT_EQ(info->shape, (std::vector<int64_t>{3, 4}));
}

TEST(Safetensors, ComplexMetadataIsChecked) {
  TempDir dir;
  auto with_meta = [&](const std::string& meta) {
    const std::string header = R"({"__metadata__": {"parity.complex": )" + meta +
                               R"(}, "a": {"dtype": "F64", "shape": [2, 2], "data_offsets": [0, 32]}, "b": {"dtype": "F32", "shape": [2], "data_offsets": [32, 40]}})";
    return OpenBytes(dir, Craft(header, std::string(40, '\0')));
  };
  ASSERT_TRUE(with_meta(R"("{\"a\": \"complex128\"}")").ok());
  EXPECT_TRUE(FailsWith(with_meta(R"("{\"z\": \"complex128\"}")"), {"parity.complex.z", "no such tensor"}));
  EXPECT_TRUE(FailsWith(with_meta(R"("{\"b\": \"complex128\"}")"), {"parity.complex.b", "F64"}));
  EXPECT_TRUE(FailsWith(with_meta(R"("{\"a\": \"complex7\"}")"), {"parity.complex.a", "complex128"}));
  EXPECT_TRUE(FailsWith(with_meta(R"("[1")"), {"parity.complex", "not a JSON object"}));
}

TEST(Safetensors, TensorsOutliveTheFileObject) {
  TempDir dir;
  at::Tensor t = at::randn({128});
  ASSERT_TRUE(Save(dir / "a.safetensors", {{"t", t}}).ok());
  at::Tensor got;
  {
    auto f = File::Open(dir / "a.safetensors");
    ASSERT_TRUE(f.ok());
    got = *f->Get("t");
  }
  got.add_(1);  // copy-on-write mapping: writable, does not touch the file
  EXPECT_TRUE(at::equal(got, t + 1));
  auto again = File::Open(dir / "a.safetensors");
  EXPECT_TRUE(at::equal(*again->Get("t"), t));
}

TEST(Safetensors, UnknownNameIsAnError) {
  TempDir dir;
  ASSERT_TRUE(Save(dir / "a.safetensors", {{"t", at::randn({2})}}).ok());
  auto f = File::Open(dir / "a.safetensors");
  EXPECT_TRUE(FailsWith(f->Get("nope"), {"a.safetensors", "no tensor named \"nope\""}));
}

struct Malformed {
  const char* label;
  std::string bytes;
  std::vector<std::string> needles;
};

void PrintTo(const Malformed& m, std::ostream* os) { *os << m.label; }

class SafetensorsMalformed : public ::testing::TestWithParam<Malformed> {};

TEST_P(SafetensorsMalformed, IsRejectedWithItsReason) {
  TempDir dir;
  const Malformed& m = GetParam();
  auto f = OpenBytes(dir, m.bytes);
  std::vector<std::string> needles = m.needles;
  needles.push_back("t.safetensors");
  ASSERT_FALSE(f.ok()) << m.label;
  for (const auto& n : needles) EXPECT_NE(f.error().message.find(n), std::string::npos) << m.label << ": " << f.error().message;
}

const std::string k8(8, '\0');
const std::string k4(4, '\0');

INSTANTIATE_TEST_SUITE_P(
    All, SafetensorsMalformed,
    ::testing::Values(
        Malformed{"short", std::string(5, '\0'), {"shorter than the 8-byte header length"}},
        Malformed{"header_past_end", Craft("{}", "", 4096), {"runs past the end"}},
        Malformed{"header_too_big", Craft("{}", "", 200'000'000), {"exceeds the 100 MB limit"}},
        Malformed{"not_json", Craft("{nope", ""), {"not valid JSON"}},
        Malformed{"not_object", Craft("[1,2]", ""), {"not a JSON object"}},
        Malformed{
            "duplicate",
            Craft(
                R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                k8),
            {"duplicate tensor name \"a\""}},
        Malformed{"unknown_dtype",
                  Craft(R"({"a":{"dtype":"F128","shape":[1],"data_offsets":[0,4]}})", k4),
                  {"tensor \"a\"", "dtype", "F128"}},
        Malformed{"missing_field", Craft(R"({"a":{"dtype":"F32","shape":[1]}})", k4), {"missing field \"data_offsets\""}},
        Malformed{"negative_dim", Craft(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", k4), {"field \"shape\""}},
        Malformed{"bad_offsets", Craft(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", k4), {"data_offsets"}},
        Malformed{
            "length_mismatch", Craft(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", k4), {"shape x dtype needs 8"}},
        Malformed{"past_data", Craft(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", k4), {"past the data section"}},
        Malformed{
            "overlap",
            Craft(
                R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                k8),
            {"overlaps"}},
        Malformed{"gap", Craft(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", k8), {"gap of 4 bytes"}},
        Malformed{"uncovered",
                  Craft(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", k8),
                  {"data section is 8 bytes but the tensors cover 4"}},
        Malformed{"overflow",
                  Craft(R"({"a":{"dtype":"F64","shape":[4611686018427387904,4611686018427387904],"data_offsets":[0,8]}})", k8),
                  {"overflows"}},
        Malformed{"metadata_not_strings", Craft(R"({"__metadata__":{"k":1}})", ""), {"__metadata__.k is not a string"}}),
    [](const ::testing::TestParamInfo<Malformed>& info) { return std::string(info.param.label); });

}  // namespace
}  // namespace parity::safetensors
