#include "compare/compare_files.h"

#include <ATen/ops/randn.h>
#include <gtest/gtest.h>

#include "repro/safetensors.h"
#include "test_helpers.h"

namespace parity::compare {
namespace {

using testing::FailsWith;
using testing::TempDir;

TEST(CompareFiles, MatchesByNameWithOverrides) {
  TempDir dir;
  at::Tensor a = at::randn({64}), b = at::randn({64});
  ASSERT_TRUE(safetensors::Save(dir / "ref.safetensors", {{"a", a}, {"b", b}}).ok());
  ASSERT_TRUE(safetensors::Save(dir / "res.safetensors", {{"b", b + 5e-3}, {"a", a}}).ok());
  CompareFilesOptions o;
  auto r = CompareFiles(dir / "ref.safetensors", dir / "res.safetensors", o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_FALSE(r->pass);
  ASSERT_EQ(r->tensors.size(), 2u);
  EXPECT_TRUE(r->tensors[0].second.pass);
  EXPECT_FALSE(r->tensors[1].second.pass);
  o.tol_overrides["b"] = 1e-2;
  r = CompareFiles(dir / "ref.safetensors", dir / "res.safetensors", o);
  EXPECT_TRUE(r->pass);
  EXPECT_NE(r->ToText().find("PASS"), std::string::npos);
  EXPECT_EQ(r->ToJson()["tensors"].size(), 2u);
}

TEST(CompareFiles, NameSetsMustMatch) {
  TempDir dir;
  ASSERT_TRUE(safetensors::Save(dir / "ref.safetensors", {{"a", at::randn({2})}}).ok());
  ASSERT_TRUE(safetensors::Save(dir / "res.safetensors", {{"z", at::randn({2})}}).ok());
  EXPECT_TRUE(
      FailsWith(CompareFiles(dir / "ref.safetensors", dir / "res.safetensors", {}), {"res.safetensors", "no tensor \"a\""}));
  CompareFilesOptions o;
  o.tol_overrides["q"] = 1;
  ASSERT_TRUE(safetensors::Save(dir / "res.safetensors", {{"a", at::randn({2})}}).ok());
  EXPECT_TRUE(FailsWith(CompareFiles(dir / "ref.safetensors", dir / "res.safetensors", o), {"--tol-override", "\"q\""}));
}

TEST(CompareFiles, ParsesTolOverrides) {
  auto ok = ParseTolOverride("logits=1e-3");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->first, "logits");
  EXPECT_DOUBLE_EQ(ok->second, 1e-3);
  EXPECT_TRUE(FailsWith(ParseTolOverride("logits"), {"expected NAME=TOL"}));
  EXPECT_TRUE(FailsWith(ParseTolOverride("a=x"), {"not a non-negative number"}));
  EXPECT_TRUE(FailsWith(ParseTolOverride("a=-1"), {"not a non-negative number"}));
}

}  // namespace
}  // namespace parity::compare
