#include "runtime/tool_script.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "test_helpers.h"
#include "util/files.h"

namespace parity::runtime {
namespace {
namespace fs = std::filesystem;

TEST(ToolScript, WritesTheReproScriptWithoutAWorkerAndDropsItsLog) {
  testing::TempDir tmp;
  testing::WriteSmallRepro(tmp.path() / "r");
  const fs::path out = tmp.path() / "r" / "repro.py";
  nlohmann::json req = {{"repro", (tmp.path() / "r").string()}, {"dynamo_backend", "inductor"},
                        {"imports", {"my_plugin"}}, {"out", out.string()}};
  ASSERT_TRUE(RunToolScript("repro_script", {req.dump()}, tmp.path() / "script.log").ok());
  auto text = ReadFile(out);
  ASSERT_TRUE(text.ok());
  EXPECT_NE(text->find("DYNAMO_BACKEND = \"inductor\""), std::string::npos);
  EXPECT_NE(text->find("import my_plugin"), std::string::npos);
  EXPECT_NE(text->find("# ---- same.py ----"), std::string::npos);
  EXPECT_EQ(text->find("from . import"), std::string::npos);  // inlined, nothing of the package imported
  EXPECT_FALSE(fs::exists(tmp.path() / "script.log"));
}

TEST(ToolScript, AFailureNamesTheScriptHowItEndedAndItsOutput) {
  testing::TempDir tmp;
  nlohmann::json req = {{"repro", (tmp.path() / "missing").string()}, {"out", (tmp.path() / "repro.py").string()}};
  Status st = RunToolScript("repro_script", {req.dump()}, tmp.path() / "script.log");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("repro_script.py ended (exit 1)"), std::string::npos) << st.error().message;
  EXPECT_NE(st.error().message.find("manifest.json"), std::string::npos) << st.error().message;
  EXPECT_TRUE(fs::exists(tmp.path() / "script.log"));
}

}  // namespace
}  // namespace parity::runtime
