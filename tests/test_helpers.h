// Shared helpers for the unit tests: temp dirs, the test-data fixture, a small valid repro.
#pragma once

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "repro/repro_dir.h"

namespace parity::testing {

// A fresh directory removed at scope exit.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& s) const { return path_ / s; }

 private:
  std::filesystem::path path_;
};

// $PARITY_TEST_DATA (made by tests/gen_test_data.py); empty when unset.
std::filesystem::path TestData();
#define PARITY_REQUIRE_TEST_DATA() \
  if (::parity::testing::TestData().empty()) GTEST_SKIP() << "PARITY_TEST_DATA unset"

// An empty graph entry named `name`, stored at graphs/<name>.json.
GraphEntry NewGraphEntry(const std::string& name);

// The graph of graph JSON `text` (as file `file` would hold it); throws on a malformed one.
ir::Graph ParseGraph(const std::string& text, const std::string& file = "test.json");

// Writes a small valid repro dir: y = relu(x + w); s = sum(y, [1]); returns (y, s).
void WriteSmallRepro(const std::filesystem::path& dir);

// A stream socket listening at the Unix socket `path` (`backlog` connections), or -1.
int ListenUnix(const std::string& path, int backlog = 1);

// A fake Python worker: listens on the Unix socket `path` (before returning), accepts one
// connection, answers each request (a line, or an 8-byte frame starting with \x01) with the next
// of `answers` (a frame as it is, anything else as a line), then closes. The requests it read go
// to `seen` when given.
std::thread FakeWorkerSocket(const std::string& path, std::vector<std::string> answers, std::vector<std::string>* seen = nullptr);

std::string Slurp(const std::filesystem::path& p);
void Spit(const std::filesystem::path& p, const std::string& data);

// Asserts `e` failed and its message contains every needle.
template <typename T>
::testing::AssertionResult FailsWith(const Expected<T>& e, std::initializer_list<std::string> needles) {
  if (e.ok()) return ::testing::AssertionFailure() << "expected an error, got success";
  for (const auto& n : needles)
    if (e.error().message.find(n) == std::string::npos)
      return ::testing::AssertionFailure() << "message \"" << e.error().message << "\" lacks \"" << n << "\"";
  return ::testing::AssertionSuccess();
}

}  // namespace parity::testing
