#include "minifier/minify.h"

#include <gtest/gtest.h>

namespace parity::minifier {
namespace {

TEST(Minify, OutputGoesBesideTheReproDirHoweverItIsSpelled) {
  EXPECT_EQ(DefaultOutDir("out/repros/r"), "out/repros/r-minify");
  EXPECT_EQ(DefaultOutDir("out/repros/r/"), "out/repros/r-minify");  // not out/repros/r/-minify, inside the repro dir
  EXPECT_EQ(DefaultOutDir("out/repros/r//"), "out/repros/r-minify");
  EXPECT_EQ(DefaultOutDir("/abs/r/"), "/abs/r-minify");
  EXPECT_EQ(DefaultOutDir("r"), "r-minify");
}

}  // namespace
}  // namespace parity::minifier
