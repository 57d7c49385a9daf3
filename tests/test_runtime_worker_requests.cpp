// The C++ side of the worker protocol against the Python side: kRequestNames is worker.py's
// request table (COMMANDS), name for name, and each request function names its request.
#include "runtime/worker_requests.h"

#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace parity::runtime::requests {
namespace {

// The keys of worker.py's COMMANDS = {...}, in order.
std::vector<std::string> WorkerTable() {
  std::ifstream in(std::string(PARITY_SOURCE_DIR) + "/tools/parity_capture/worker.py");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  const size_t start = text.find("\nCOMMANDS = {");
  EXPECT_NE(start, std::string::npos) << "worker.py has no COMMANDS table";
  const std::string table = text.substr(start, text.find('}', start) - start);
  std::vector<std::string> names;
  const std::regex key("\"([a-z_0-9]+)\"\\s*:");
  for (auto it = std::sregex_iterator(table.begin(), table.end(), key); it != std::sregex_iterator(); ++it)
    names.push_back((*it)[1]);
  return names;
}

TEST(WorkerRequests, TheNamesAreTheWorkersTable) {
  const std::vector<std::string> ours(std::begin(kRequestNames), std::end(kRequestNames));
  EXPECT_EQ(ours, WorkerTable());
}

TEST(WorkerRequests, EachFunctionAsksForARequestTheTableHas) {
  const std::vector<std::string> table = WorkerTable();
  RunGraph run;
  run.variants.push_back({"r2", "g", "o2"});
  const std::vector<json> built = {
      Ping(), ListModels(), ListBackends(), CaptureModel({"mlp", "/o", "eval", "float32", "cpu", 0}),
      ImportModules({"m"}), HostRepeat(Host::kCall, 3),
      HostWhole(Host::kBatch, {{"op", "x"}}, json::object(), json::array(), 1),
      HostWhole(Host::kBackward, {{"op", "x"}}, json::object(), json::array(), std::nullopt), BackendRun(run),
      TimeRuns(3), AotGraphs("/r", "g", "aot_eager", "cpu", "/o"),
      CompileArtifact(Artifact::kAotInductor, "/r", "g", "cpu", json::object(), "/o"),
      CompileArtifact(Artifact::kTorchScript, "/r", "g", "cpu", json::object(), "/o"),
      CompileArtifact(Artifact::kExportPt2, "/r", "g", "cpu", json::object(), "/o"), Bisect({})};
  std::vector<std::string> seen;
  for (const json& r : built) {
    const std::string name = r.at("cmd").get<std::string>();
    EXPECT_NE(std::find(table.begin(), table.end(), name), table.end()) << name;
    if (std::find(seen.begin(), seen.end(), name) == seen.end()) seen.push_back(name);
  }
  EXPECT_EQ(seen.size(), table.size());  // every request of the table has its function
  EXPECT_FALSE(CaptureModel({"mlp", "/o", "eval", "float32", "cpu", 0}).contains("batch_size"));
  EXPECT_EQ(CaptureModel({"mlp", "/o", "eval", "float32", "cpu", 4})["batch_size"], 4);
  EXPECT_FALSE(HostWhole(Host::kBackward, json::object(), json::object(), json::array(), std::nullopt).contains("plan"));
  EXPECT_EQ(BackendRun(run)["variants"][0]["out"], "o2");
}

}  // namespace
}  // namespace parity::runtime::requests
