// What a file alone must hold of its higher-order calls (repro/hop_check.h), checked at load:
// each rule once, on a cond and a while_loop written as the format writes them.
#include "repro/hop_check.h"

#include <gtest/gtest.h>

#include "repro/graph_json.h"

namespace parity::ir {
namespace {

using nlohmann::json;

json T(const char* dtype, std::vector<int> shape) {
  std::vector<int> stride(shape.size(), 1);
  return {{"val", json::array({{{"dtype", dtype}, {"shape", shape}, {"stride", stride}}})}};
}

// relu(x) when sum(x) > 0, else sin(x); every value's meta recorded.
json Cond() {
  auto branch = [](const char* op) {
    return json{{"nodes", json::array({{{"name", "a"}, {"op", "placeholder"}, {"meta", T("float32", {4, 8})}},
                                       {{"name", "r"}, {"op", "call_function"}, {"target", op}, {"args", {{{"node", "a"}}}}, {"meta", T("float32", {4, 8})}},
                                       {{"name", "output"}, {"op", "output"}, {"args", {{{{"node", "r"}}}}}}})}};
  };
  return {{"version", 3},
          {"name", "c"},
          {"subgraphs", {{"t", branch("aten::relu")}, {"f", branch("aten::sin")}}},
          {"nodes", json::array({{{"name", "x"}, {"op", "placeholder"}, {"meta", T("float32", {4, 8})}},
                                 {{"name", "s"}, {"op", "call_function"}, {"target", "aten::sum"}, {"args", {{{"node", "x"}}}}, {"meta", T("float32", {})}},
                                 {{"name", "p"}, {"op", "call_function"}, {"target", "aten::gt.Scalar"}, {"args", {{{"node", "s"}}, 0}}, {"meta", T("bool", {})}},
                                 {{"name", "c"}, {"op", "call_function"}, {"target", "hop::cond"},
                                  {"args", {{{"node", "p"}}, {{"subgraph", "t"}}, {{"subgraph", "f"}}, {{{"node", "x"}}}}}, {"meta", T("float32", {4, 8})}},
                                 {{"name", "g"}, {"op", "call_function"}, {"target", "getitem"}, {"args", {{{"node", "c"}}, 0}}, {"meta", T("float32", {4, 8})}},
                                 {{"name", "output"}, {"op", "output"}, {"args", {{{{"node", "g"}}}}}}})}};
}

json& Call(json& g) { return g["nodes"][3]; }

std::string Refused(const json& g) {
  auto r = GraphFromJson(g, "c.json");
  if (r.ok()) return "";
  EXPECT_EQ(r.error().kind, ErrorKind::kBadInput);
  return r.error().message;
}

TEST(HopCheck, AValidCallLoads) { EXPECT_EQ(Refused(Cond()), ""); }

TEST(HopCheck, EachRuleNamesTheNodeAndTheField) {
  struct Case {
    const char* what;
    std::function<void(json&)> mutate;
    const char* says;
  };
  const std::vector<Case> cases = {
      {"unknown op", [](json& g) { Call(g)["target"] = "hop::teleport"; }, "field \"target\": hop::teleport is no higher-order op"},
      {"no arguments", [](json& g) { Call(g)["args"] = json::array(); }, "field \"args\": takes 4 arguments"},
      {"value for a subgraph", [](json& g) { Call(g)["args"][1] = {{"node", "x"}}; }, "field \"args[1]\": expected a subgraph (the true branch)"},
      {"subgraph for values", [](json& g) { Call(g)["args"][3] = json::array({{{"subgraph", "t"}}}); }, "field \"args[3]\": expected values"},
      {"operands", [](json& g) { Call(g)["args"][3].push_back({{"node", "x"}}); }, "takes 1 operands, the call gives it 2"},
      {"float predicate", [](json& g) { Call(g)["args"][0] = {{"node", "x"}}; }, "the predicate must be a bool or a one-element bool tensor, the file records float32[4, 8]"},
      {"string predicate", [](json& g) { Call(g)["args"][0] = "yes"; }, "the predicate must be a bool"},
      {"branch results", [](json& g) { g["subgraphs"]["f"]["nodes"][2]["args"][0].push_back({{"node", "a"}}); },
       "the true branch returns 1 values, the false branch 2"},
      {"untaken branch's type", [](json& g) { g["subgraphs"]["f"]["nodes"][1]["meta"] = T("float32", {2, 2}); },
       "the false branch returns float32[2, 2] as value 0, where float32[4, 8] is recorded"},
      {"a subgraph in a keyword", [](json& g) { Call(g)["kwargs"] = {{"fn", {{"subgraph", "t"}}}}; }, "field \"kwargs.fn\""},
  };
  for (const auto& c : cases) {
    json g = Cond();
    c.mutate(g);
    const std::string why = Refused(g);
    EXPECT_NE(why.find("node \"c\""), std::string::npos) << c.what << ": " << why;
    EXPECT_NE(why.find(c.says), std::string::npos) << c.what << ": " << why;
  }
}

TEST(HopCheck, ACallInsideASubgraphIsCheckedToo) {
  json g = Cond();
  json inner = Cond();
  Call(inner)["args"][3] = json::array();  // no operands for a branch taking one
  g["subgraphs"]["t"] = {{"nodes", inner["nodes"]}, {"subgraphs", inner["subgraphs"]}};
  g["subgraphs"]["t"]["nodes"][0]["name"] = "x";  // the branch's operand
  const std::string why = Refused(g);
  EXPECT_NE(why.find("subgraph \"t\": graph \"t\": node \"c\""), std::string::npos) << why;
}

TEST(HopCheck, MetaThatIsNotRecordedIsNotChecked) {
  json g = Cond();
  for (auto& n : g["subgraphs"]["f"]["nodes"]) n.erase("meta");
  EXPECT_EQ(Refused(g), "");
}

}  // namespace
}  // namespace parity::ir
