#include "test_helpers.h"

#include <ATen/ops/randn.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/sum.h>

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include "repro/graph_json.h"
#include "util/files.h"
#include "util/socket.h"

namespace parity::testing {
namespace fs = std::filesystem;

TempDir::TempDir() {
  std::random_device rd;
  path_ = fs::temp_directory_path() / ("parity_test_" + std::to_string(rd()) + std::to_string(rd()));
  fs::create_directories(path_);
}
TempDir::~TempDir() { RemoveAll(path_); }

fs::path TestData() {
  const char* v = std::getenv("PARITY_TEST_DATA");
  return v ? fs::path(v) : fs::path();
}

int ListenUnix(const std::string& path, int backlog) { return parity::ListenUnix(path, SOCK_STREAM, backlog); }

std::thread FakeWorkerSocket(const std::string& path, std::vector<std::string> answers, std::vector<std::string>* seen) {
  const int srv = ListenUnix(path);
  EXPECT_GE(srv, 0) << path;
  return std::thread([srv, answers, seen] {
    int c = ::accept(srv, nullptr, nullptr);
    std::string buf;
    char tmp[4096];
    auto complete = [&] { return !buf.empty() && (buf[0] == '\x01' ? buf.size() >= 8 : buf.find('\n') != std::string::npos); };
    for (const auto& a : answers) {
      while (!complete()) {
        ssize_t n = ::recv(c, tmp, sizeof tmp, 0);
        if (n <= 0) break;
        buf.append(tmp, static_cast<size_t>(n));
      }
      const size_t len = !buf.empty() && buf[0] == '\x01' ? 8 : buf.find('\n') + 1;
      if (seen) seen->push_back(buf.substr(0, len));
      buf.erase(0, len);
      std::string out = !a.empty() && a[0] == '\x01' ? a : a + "\n";
      (void)!::send(c, out.data(), out.size(), MSG_NOSIGNAL);
    }
    ::close(c);
    ::close(srv);
  });
}

std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void Spit(const fs::path& p, const std::string& data) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << data;
}

ir::Graph ParseGraph(const std::string& text, const std::string& file) {
  auto g = ir::GraphFromJson(nlohmann::json::parse(text), file);
  if (!g.ok()) throw std::runtime_error(g.error().message);
  return std::move(*g);
}

GraphEntry NewGraphEntry(const std::string& name) {
  GraphEntry e;
  e.name = name;
  e.file = "graphs/" + name + ".json";
  e.graph.set_name(name);
  return e;
}

void WriteSmallRepro(const fs::path& dir) {
  using ir::Arg;
  using ir::NodeKind;
  GraphEntry e = NewGraphEntry("g");
  ir::Graph& g = e.graph;
  ir::Node* x = g.Append(NodeKind::kPlaceholder, "x", "x");
  x->meta = {ir::TensorMeta{c10::kFloat, {2, 3}, {3, 1}}};
  ir::Node* w = g.Append(NodeKind::kGetAttr, "w", "param/w");
  w->meta = {ir::TensorMeta{c10::kFloat, {3}, {1}}};
  ir::Node* add = g.Append(NodeKind::kCallFunction, "add", "aten::add.Tensor");
  add->args = {Arg::Ref(x), Arg::Ref(w)};
  ir::Node* relu = g.Append(NodeKind::kCallFunction, "relu", "aten::relu");
  relu->args = {Arg::Ref(add)};
  ir::Node* sum = g.Append(NodeKind::kCallFunction, "sum", "aten::sum.dim_IntList");
  sum->args = {Arg::Ref(relu), Arg::List({Arg::Int(1)})};
  ir::Node* out = g.Append(NodeKind::kOutput, "output", "output");
  out->args = {Arg::List({Arg::Ref(relu), Arg::Ref(sum)})};
  e.inputs = {{"x", "g/input/x"}};
  e.expected_outputs = {"g/output/0", "g/output/1"};
  e.output_names = {"y", "s"};
  // Fixed values (a seeded generator), so tests that read them do not depend on the draw: with
  // random ones, relu(x + w) was all zeros in about one run of a hundred.
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(20261127);
  at::Tensor xt = at::randn({2, 3}, gen), wt = at::randn({3}, gen);
  at::Tensor y = at::relu(xt + wt);
  at::Tensor s = at::sum(y, {1});
  Manifest m;
  m.model = "small";
  m.torch_version = "test";
  m.producer = "test_helpers";
  auto st = WriteReproDir(dir, m, {&e}, {{"g/input/x", xt}, {"param/w", wt}, {"g/output/0", y}, {"g/output/1", s}});
  if (!st.ok()) throw std::runtime_error(st.error().message);
}

}  // namespace parity::testing
