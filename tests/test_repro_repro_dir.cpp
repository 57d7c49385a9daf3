#include "repro/repro_dir.h"

#include <ATen/ops/randn.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <regex>

#include "interpreter/interpreter.h"
#include "test_helpers.h"

namespace parity {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::FailsWith;
using testing::Slurp;
using testing::Spit;
using testing::TempDir;

TEST(ReproDir, LoadsAValidDir) {
  TempDir dir;
  testing::WriteSmallRepro(dir.path());
  auto r = ReproDir::Load(dir.path());
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->graphs().size(), 1u);
  EXPECT_EQ(r->graphs()[0].output_names, (std::vector<std::string>{"y", "s"}));
  EXPECT_EQ(r->manifest().model, "small");
  auto inputs = r->Inputs(r->graphs()[0]);
  ASSERT_TRUE(inputs.ok());
  EXPECT_EQ(inputs->at("x").sizes(), c10::IntArrayRef({2, 3}));
}

TEST(ReproDir, RewriteKeepsUnknownManifestFields) {
  TempDir dir;
  testing::WriteSmallRepro(dir.path());
  json m = json::parse(Slurp(dir / "manifest.json"));
  m["notes"] = "toy";  // a field parity does not interpret ("suite" is a manifest field now)
  m["suite"] = "timm";
  m["batch_size"] = 8;
  Spit(dir / "manifest.json", m.dump());
  auto r = ReproDir::Load(dir.path());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->manifest().extra["notes"], "toy");
  EXPECT_EQ(r->manifest().suite, "timm");
  EXPECT_EQ(r->manifest().batch_size, 8);
  EXPECT_FALSE(r->manifest().extra.contains("suite"));
}

TEST(ReproDir, BatchSizeMustBeANonNegativeInteger) {
  TempDir dir;
  testing::WriteSmallRepro(dir.path());
  json m = json::parse(Slurp(dir / "manifest.json"));
  m["batch_size"] = "eight";
  Spit(dir / "manifest.json", m.dump());
  EXPECT_TRUE(testing::FailsWith(ReproDir::Load(dir.path()), {"manifest.json", "batch_size"}));
}

// Each case corrupts one thing of a valid dir and names what the error must say.
struct Corruption {
  const char* label;
  std::function<void(const fs::path&)> corrupt;
  std::vector<std::string> needles;
};

void PrintTo(const Corruption& c, std::ostream* os) { *os << c.label; }

void EditJson(const fs::path& p, const std::function<void(json&)>& f) {
  json j = json::parse(Slurp(p));
  f(j);
  Spit(p, j.dump());
}
void EditManifest(const fs::path& d, const std::function<void(json&)>& f) { EditJson(d / "manifest.json", f); }
void EditGraph(const fs::path& d, const std::function<void(json&)>& f) { EditJson(d / "graphs/g.json", f); }

// Rewrites the safetensors header in place (same length, padded with spaces).
void EditSafetensorsHeader(const fs::path& d, const std::function<std::string(std::string)>& f) {
  std::string bytes = Slurp(d / "tensors.safetensors");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  std::string header = f(bytes.substr(8, n));
  ASSERT_LE(header.size(), n);
  header.resize(n, ' ');
  Spit(d / "tensors.safetensors", bytes.substr(0, 8) + header + bytes.substr(8 + n));
}

// The dump backend's per-graph facts: what each graph ran as, filled from the top level where a
// graph does not say, kept on rewrite.
TEST(ReproDir, PerGraphFactsDefaultToTheTopLevelAndSurviveARewrite) {
  TempDir dir;
  testing::WriteSmallRepro(dir.path());
  EditManifest(dir.path(), [](json& j) {
    j["dtype"] = "bfloat16";
    j["device"] = "cuda";
    j["graphs"][0]["mode"] = "train";
    j["graphs"][0]["dtype"] = "float32";
    j["graphs"][0]["amp"] = "bfloat16";
    j["graphs"][0]["tangents"] = {"g/output/0", nullptr};
    j["graphs"][0]["requires_grad"] = {"x", "param/w"};
    j["graphs"][0]["note"] = "kept";
    j["graphs"][0]["backward_of"] = "graph_0";
  });
  auto r = ReproDir::Load(dir.path());
  ASSERT_TRUE(r.ok()) << r.error().message;
  const GraphEntry& g = r->graphs()[0];
  EXPECT_EQ(g.mode, "train");
  EXPECT_EQ(g.dtype, "float32");
  EXPECT_EQ(g.device, "cuda");  // from the top level
  EXPECT_EQ(g.amp, "bfloat16");
  EXPECT_EQ(g.tangents, (std::vector<std::string>{"g/output/0", ""}));
  EXPECT_TRUE(g.Differentiates("x") && g.Differentiates("param/w"));
  const json back = ManifestToJson(r->manifest(), {&g});
  EXPECT_EQ(back["graphs"][0]["mode"], "train");
  EXPECT_FALSE(back["graphs"][0].contains("device"));  // the same as the top level: not repeated
  EXPECT_EQ(back["graphs"][0]["tangents"][1], nullptr);
  EXPECT_EQ(back["graphs"][0]["note"], "kept");
  EXPECT_EQ(g.backward_of, "graph_0");
  EXPECT_EQ(back["graphs"][0]["backward_of"], "graph_0");
}

TEST(ReproDir, AnOldDirsGraphsTakeTheManifestsFacts) {
  TempDir dir;
  testing::WriteSmallRepro(dir.path());
  auto r = ReproDir::Load(dir.path());
  ASSERT_TRUE(r.ok());
  const GraphEntry& g = r->graphs()[0];
  EXPECT_EQ(g.mode, "eval");
  EXPECT_EQ(g.dtype, "float32");
  EXPECT_EQ(g.device, "cpu");
  EXPECT_FALSE(g.has_tangents());
  EXPECT_TRUE(g.Differentiates("anything"));  // unset: every floating input and parameter
}

TEST(ReproDir, ACaptureThatRecordedNoGraphSaysWhy) {
  TempDir dir;
  testing::WriteSmallRepro(dir.path());
  EditManifest(dir.path(), [](json& j) {
    j["graphs"] = json::array();
    j["skipped_graphs"] = {{{"graph", "graph_0"}, {"reason", "symbolic shapes (s77)"}}};
  });
  EXPECT_TRUE(FailsWith(ReproDir::Load(dir.path()), {"manifest.json", "recorded no graph", "skipped_graphs", "s77"}));
}

class ReproDirMalformed : public ::testing::TestWithParam<Corruption> {};

TEST_P(ReproDirMalformed, IsRejectedNamingFileAndField) {
  TempDir dir;
  testing::WriteSmallRepro(dir.path());
  GetParam().corrupt(dir.path());
  auto r = ReproDir::Load(dir.path());
  ASSERT_FALSE(r.ok()) << GetParam().label << " loaded";
  EXPECT_EQ(r.error().kind, ErrorKind::kBadInput);
  for (const auto& n : GetParam().needles)
    EXPECT_NE(r.error().message.find(n), std::string::npos)
        << GetParam().label << ": \"" << r.error().message << "\" lacks \"" << n << "\"";
}

INSTANTIATE_TEST_SUITE_P(
    All, ReproDirMalformed,
    ::
        testing::
            Values(
                Corruption{"deep_manifest_value",
                           [](const fs::path& d) {
                             std::string m = Slurp(d / "manifest.json");
                             Spit(d / "manifest.json", "{\"deep\": " + std::string(100000, '[') + std::string(100000, ']') +
                                                           ", " + m.substr(m.find('{') + 1));
                           },
                           {"manifest.json", "nested deeper than 200"}},
                Corruption{"deep_node_argument",
                           [](const fs::path& d) {
                             std::string g = Slurp(d / "graphs/g.json");
                             const auto at = g.find('[', g.find("\"args\"")) + 1;
                             Spit(d / "graphs/g.json", g.substr(0, at) + std::string(30000, '[') + std::string(30000, ']') + ", " +
                                                           g.substr(at));
                           },
                           {"g.json", "nested deeper than 200"}},
                Corruption{"fifo_manifest",
                           [](const fs::path& d) {
                             fs::remove(d / "manifest.json");
                             ASSERT_EQ(::mkfifo((d / "manifest.json").c_str(), 0644), 0);
                           },
                           {"manifest.json", "not a regular file"}},
                Corruption{"fifo_graph",
                           [](const fs::path& d) {
                             fs::remove(d / "graphs/g.json");
                             ASSERT_EQ(::mkfifo((d / "graphs/g.json").c_str(), 0644), 0);
                           },
                           {"g.json", "not a regular file"}},
                Corruption{"fifo_tensors",
                           [](const fs::path& d) {
                             fs::remove(d / "tensors.safetensors");
                             ASSERT_EQ(::mkfifo((d / "tensors.safetensors").c_str(), 0644), 0);
                           },
                           {"tensors.safetensors", "not a regular file"}},
                Corruption{"manifest_symlink_to_dev_zero",
                           [](const fs::path& d) {
                             fs::remove(d / "manifest.json");
                             fs::create_symlink("/dev/zero", d / "manifest.json");
                           },
                           {"manifest.json", "outside the repro dir"}},
                Corruption{"int_node_target",
                           [](const fs::path& d) { EditGraph(d, [](json& j) { j["nodes"][1]["target"] = 5; }); },
                           {"g.json", ".target", "not a string"}},
                Corruption{"int_graph_name",
                           [](const fs::path& d) { EditGraph(d, [](json& j) { j["name"] = 3; }); },
                           {"g.json", "\"name\" is not a string"}},
                Corruption{
                    "no_manifest", [](const fs::path& d) { fs::remove(d / "manifest.json"); }, {"manifest.json", "cannot open"}},
                Corruption{"manifest_not_json",
                           [](const fs::path& d) { Spit(d / "manifest.json", "{\"version\": 1,"); },
                           {"manifest.json", "not valid JSON"}},
                Corruption{"wrong_version",
                           [](const fs::path& d) { EditManifest(d, [](json& j) { j["version"] = 7; }); },
                           {"manifest.json", "\"version\" is 7"}},
                Corruption{"bad_mode",
                           [](const fs::path& d) { EditManifest(d, [](json& j) { j["mode"] = "infer"; }); },
                           {"manifest.json", "\"mode\" is \"infer\""}},
                Corruption{"bad_graph_mode",
                           [](const fs::path& d) { EditManifest(d, [](json& j) { j["graphs"][0]["mode"] = "fit"; }); },
                           {"graphs[0]", "\"mode\" is \"fit\""}},
                Corruption{"bad_dtype",
                           [](const fs::path& d) { EditManifest(d, [](json& j) { j["dtype"] = "float99"; }); },
                           {"manifest.json", "\"dtype\" is \"float99\", not a torch dtype name"}},
                Corruption{"bad_graph_dtype",
                           [](const fs::path& d) { EditManifest(d, [](json& j) { j["graphs"][0]["dtype"] = "fp32"; }); },
                           {"graphs[0]", "\"dtype\" is \"fp32\""}},
                Corruption{"bad_amp",
                           [](const fs::path& d) { EditManifest(d, [](json& j) { j["amp"] = "int8"; }); },
                           {"manifest.json", "\"amp\" is \"int8\", not a floating dtype"}},
                Corruption{"bad_graph_amp",
                           [](const fs::path& d) { EditManifest(d, [](json& j) { j["graphs"][0]["amp"] = "bf16"; }); },
                           {"graphs[0]", "\"amp\" is \"bf16\", not a torch dtype name"}},
                Corruption{"backward_of_itself",
                           [](const fs::path& d) {
                             EditManifest(d, [](json& j) { j["graphs"][0]["backward_of"] = j["graphs"][0]["name"]; });
                           },
                           {"graphs[0]", "\"backward_of\" names the graph itself"}},
                Corruption{"backward_of_not_a_name",
                           [](const fs::path& d) { EditManifest(d, [](json& j) { j["graphs"][0]["backward_of"] = 3; }); },
                           {"graphs[0]", "backward_of"}},
                Corruption{"tangents_count",
                           [](const fs::path& d) { EditManifest(d, [](json& j) { j["graphs"][0]["tangents"] = {"g/output/0"}; }); },
                           {"graphs[0]", "\"tangents\" has 1 entries but the graph returns 2"}},
                Corruption{"tangent_missing",
                           [](const fs::path& d) {
                             EditManifest(d, [](json& j) { j["graphs"][0]["tangents"] = {"g/nope", nullptr}; });
                           },
                           {"graphs[0]", "tangents[0]", "\"g/nope\""}},
                Corruption{"tangent_shape",
                           [](const fs::path& d) {
                             EditManifest(d, [](json& j) { j["graphs"][0]["tangents"] = {"g/output/1", nullptr}; });
                           },
                           {"graphs[0]", "tangents[0]", "expects"}},
                Corruption{"tangent_not_a_key",
                           [](const fs::path& d) { EditManifest(d, [](json& j) { j["graphs"][0]["tangents"] = {3, nullptr}; }); },
                           {"graphs[0]", "\"tangents\" holds neither"}},
                Corruption{"requires_grad_unknown",
                           [](const fs::path& d) { EditManifest(d, [](json& j) { j["graphs"][0]["requires_grad"] = {"ghost"}; }); },
                           {"graphs[0]", "\"requires_grad\" names \"ghost\""}},
                Corruption{"no_graphs",
                           [](const fs::path& d) { EditManifest(d, [](json& j) { j.erase("graphs"); }); },
                           {"manifest.json", "\"graphs\""}},
                Corruption{
                    "graph_path_escapes",
                    [](const fs::path& d) { EditManifest(d, [](json& j) { j["graphs"][0]["file"] = "../../etc/passwd"; }); },
                    {"manifest.json", "graphs[0]", "\"file\"", "leaves the repro dir"}},
                Corruption{"graph_path_absolute",
                           [](const fs::path& d) { EditManifest(d, [](json& j) { j["graphs"][0]["file"] = "/etc/passwd"; }); },
                           {"graphs[0]", "absolute path"}},
                Corruption{"tensors_path_escapes",
                           [](const fs::path& d) { EditManifest(d, [](json& j) { j["tensors"] = "../t.safetensors"; }); },
                           {"manifest.json", "\"tensors\"", "leaves the repro dir"}},
                Corruption{"graph_not_json",
                           [](const fs::path& d) { Spit(d / "graphs/g.json", "nodes: []"); },
                           {"graphs/g.json", "not valid JSON"}},
                Corruption{"unknown_node_ref",
                           [](const fs::path& d) {
                             EditGraph(d, [](json& j) { j["nodes"][3]["args"][0] = {{"node", "ghost"}}; });
                           },
                           {"graphs/g.json", "nodes[3] (\"relu\").args[0].node", "unknown node \"ghost\""}},
                Corruption{"duplicate_node",
                           [](const fs::path& d) { EditGraph(d, [](json& j) { j["nodes"][3]["name"] = "add"; }); },
                           {"graphs/g.json", "nodes[3] (\"add\").name", "duplicate"}},
                Corruption{"missing_input_mapping",
                           [](const fs::path& d) { EditManifest(d, [](json& j) { j["graphs"][0]["inputs"] = json::object(); }); },
                           {"graphs[0]", "\"inputs\" has no entry for placeholder \"x\""}},
                Corruption{"input_tensor_missing",
                           [](const fs::path& d) { EditManifest(d, [](json& j) { j["graphs"][0]["inputs"]["x"] = "nope"; }); },
                           {"graphs[0]", "inputs.x", "tensor \"nope\"", "tensors.safetensors"}},
                Corruption{"get_attr_missing",
                           [](const fs::path& d) { EditGraph(d, [](json& j) { j["nodes"][1]["target"] = "param/zz"; }); },
                           {"graphs/g.json", "node \"w\"", "get_attr target \"param/zz\""}},
                Corruption{"shape_disagrees_with_meta",
                           [](const fs::path& d) {
                             EditGraph(d, [](json& j) { j["nodes"][0]["meta"]["val"][0]["shape"] = {3, 2}; });
                           },
                           {"inputs.x", "expects float32[3, 2]"}},
                Corruption{"expected_output_missing",
                           [](const fs::path& d) {
                             EditManifest(d, [](json& j) { j["graphs"][0]["expected_outputs"][1] = "g/output/9"; });
                           },
                           {"\"expected_outputs\"", "g/output/9"}},
                Corruption{"safetensors_truncated",
                           [](const fs::path& d) { fs::resize_file(d / "tensors.safetensors", 40); },
                           {"tensors.safetensors"}},
                Corruption{"safetensors_overlap",
                           [](const fs::path& d) {
                             EditSafetensorsHeader(
                                 d, [](std::string h) { return std::regex_replace(h, std::regex("\\[0,"), "[4,"); });
                           },
                           {"tensors.safetensors", "data_offsets"}},
                Corruption{
                    "safetensors_wrong_dtype",
                    [](const fs::path& d) {
                      EditSafetensorsHeader(d, [](std::string h) {
                        return std::regex_replace(h, std::regex("\"F32\""), "\"Q32\"", std::regex_constants::format_first_only);
                      });
                    },
                    {"tensors.safetensors", "unknown dtype \"Q32\""}}),
    [](const ::testing::TestParamInfo<Corruption>& info) { return std::string(info.param.label); });

// Unknown ops and schema mismatches are found when the graph is compiled for running.
Expected<interp::Program> CompileEdited(const TempDir& dir, const std::function<void(json&)>& edit, ReproDir& keep) {
  testing::WriteSmallRepro(dir.path());
  EditGraph(dir.path(), edit);
  auto r = ReproDir::Load(dir.path());
  if (!r.ok()) return r.error();
  keep = std::move(*r);
  return interp::Program::Compile(keep.graphs()[0].graph, (dir / "graphs/g.json").string());
}

TEST(ReproDirOps, UnknownOpNamesTheOpAndTheNode) {
  TempDir dir;
  ReproDir keep;
  auto p = CompileEdited(
      dir, [](json& j) { j["nodes"][3]["target"] = "aten::relux"; }, keep);
  EXPECT_TRUE(FailsWith(p, {"graphs/g.json", "node \"relu\"", "unknown op \"aten::relux\""}));
}

TEST(ReproDirOps, ArgumentsThatDoNotFitTheSchema) {
  TempDir dir;
  ReproDir keep;
  EXPECT_TRUE(FailsWith(CompileEdited(
                            dir, [](json& j) { j["nodes"][3]["args"][0] = "str"; }, keep),
                        {"node \"relu\"", "argument \"self\"", "expected Tensor, got a string"}));
  EXPECT_TRUE(FailsWith(CompileEdited(
                            dir,
                            [](json& j) {
                              j["nodes"][2]["kwargs"] = {{"beta", 2}};
                            },
                            keep),
                        {"node \"add\"", "unknown keyword argument \"beta\""}));
  EXPECT_TRUE(FailsWith(CompileEdited(
                            dir, [](json& j) { j["nodes"][3]["args"].push_back(1); }, keep),
                        {"node \"relu\"", "2 positional arguments, the schema takes 1"}));
  EXPECT_TRUE(FailsWith(CompileEdited(
                            dir,
                            [](json& j) {
                              j["nodes"][4]["args"] = json::array({{{"node", "relu"}}});
                            },
                            keep),
                        {"node \"sum\"", "required argument \"dim\" is missing"}));
  EXPECT_TRUE(FailsWith(CompileEdited(
                            dir, [](json& j) { j["nodes"][4]["args"][1] = json::array({1.5}); }, keep),
                        {"node \"sum\"", "argument \"dim\"", "expected int[], got a list"}));
}

TEST(ReproDir, TheTensorsDigestCatchesFlippedBits) {
  TempDir dir;
  testing::WriteSmallRepro(dir.path());
  EXPECT_EQ(json::parse(Slurp(dir / "manifest.json"))["tensors_sha256"].get<std::string>().size(), 64u);
  ASSERT_TRUE(ReproDir::Load(dir.path()).ok());
  std::string bytes = Slurp(dir / "tensors.safetensors");
  bytes[bytes.size() - 3] ^= 0x40;  // one bit of the last tensor's data: the header stays valid
  Spit(dir / "tensors.safetensors", bytes);
  auto r = ReproDir::Load(dir.path());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ErrorKind::kBadInput);
  EXPECT_NE(r.error().message.find("tensors.safetensors: SHA-256"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("--no-verify-digests"), std::string::npos) << r.error().message;
  ::setenv("PARITY_NO_VERIFY_DIGESTS", "1", 1);
  const bool loads = ReproDir::Load(dir.path()).ok();
  ::unsetenv("PARITY_NO_VERIFY_DIGESTS");
  EXPECT_TRUE(loads);
  EditManifest(dir.path(), [](json& j) { j["tensors_sha256"] = "xyz"; });
  EXPECT_TRUE(testing::FailsWith(ReproDir::Load(dir.path()), {"tensors_sha256", "hex"}));
}

TEST(ReproDir, ADigestAnotherProcessCheckedIsTrustedWhileTheFileKeepsItsSizeAndMtime) {
  TempDir dir;
  testing::WriteSmallRepro(dir.path());
  const fs::path file = dir / "tensors.safetensors";
  // Another process (a child: this one's checks stay its own) loads the dir and says what it checked.
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto r = ReproDir::Load(dir.path());
    const std::string said = r.ok() ? r->verified_tensors() : "";
    (void)!::write(fds[1], said.data(), said.size());
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string verified;
  char buf[512];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) verified.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  ::waitpid(pid, nullptr, 0);
  ASSERT_NE(verified.find("tensors.safetensors"), std::string::npos) << verified;
  // The data changes behind it, its size and mtime kept: this process, never told, hashes and refuses it.
  const auto mtime = fs::last_write_time(file);
  std::string bytes = Slurp(file);
  bytes[bytes.size() - 3] ^= 0x40;
  Spit(file, bytes);
  fs::last_write_time(file, mtime);
  EXPECT_TRUE(FailsWith(ReproDir::Load(dir.path()), {"SHA-256"}));
  // Told, it trusts the other's check and does not hash the file again.
  ReproDir::TrustVerifiedTensors(verified);
  auto trusted = ReproDir::Load(dir.path());
  ASSERT_TRUE(trusted.ok()) << trusted.error().message;
  EXPECT_EQ(trusted->verified_tensors(), verified);
  // Only while the file keeps them: another mtime is another file, hashed again.
  fs::last_write_time(file, mtime + std::chrono::seconds(1));
  EXPECT_TRUE(FailsWith(ReproDir::Load(dir.path()), {"SHA-256"}));
}

}  // namespace
}  // namespace parity
