#include "util/json.h"

#include <gtest/gtest.h>

#include "test_helpers.h"

namespace parity {
namespace {

TEST(Json, NestingIsBoundedBeforeParsing) {
  EXPECT_TRUE(ParseJson(std::string(200, '[') + std::string(200, ']'), "x").ok());
  EXPECT_TRUE(testing::FailsWith(ParseJson(std::string(201, '[') + std::string(201, ']'), "x.json"),
                                 {"x.json", "nested deeper than 200"}));
  EXPECT_TRUE(testing::FailsWith(ParseJson("{\"a\": " + std::string(100000, '['), "x.json"), {"nested deeper"}));
  // Brackets inside strings do not count, escaped quotes do not end them.
  EXPECT_TRUE(ParseJson("{\"s\": \"" + std::string(500, '[') + "\\\"" + std::string(500, '{') + "\"}", "x").ok());
  EXPECT_TRUE(testing::FailsWith(ParseJson("{\"a\": 1,", "x.json"), {"x.json", "not valid JSON"}));
}

}  // namespace
}  // namespace parity
