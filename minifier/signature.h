// A failure signature: what kind of failure a repro shows. A reduction candidate counts only
// when it fails the same way as the original (never on "any failure": a minifier that accepts
// any failure drifts from an accuracy bug to a crash it introduced itself).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "util/status.h"
#include "experiment/experiment.h"

namespace parity::minifier {

enum class FailureKind { kNone, kAccuracy, kException, kCrash, kTimeout };
const char* ToString(FailureKind k);

struct Signature {
  FailureKind kind = FailureKind::kNone;
  std::string exception_type;  // kException
  std::string message;         // kException: normalized first line
  int signal = 0;              // kCrash
  // kAccuracy: what its failing outputs are about, sorted: "values" (off beyond what rounding
  // explains), "rounding" (same() fails them, their noise budget says rounding alone explains
  // it), "dtype", "shape" (empty where the result lists no outputs). Accuracy failures match only
  // where these meet: a reduction that changes an output's dtype where the original's values
  // were off (a loss summed from a bfloat16 and a float32 value), or whose values differ only by
  // rounding where the original's were off by 16 noise budgets, fails another way.
  std::vector<std::string> accuracy_classes;

  // PASS and SKIPPED are no failure; so are EAGER_FAILED and NONDETERMINISTIC_EAGER_RUN (the
  // candidate itself is broken, not the backend).
  static Signature FromResult(const experiment::ExperimentResult& r);
  [[nodiscard]] static Expected<Signature> FromJson(const nlohmann::json& j);
  nlohmann::json ToJson() const;
  bool Matches(const Signature& original) const;
  std::string Describe() const;
};

// Drops what varies between runs of the same failure: numbers, hex addresses, paths, and
// everything after the first line.
std::string NormalizeMessage(const std::string& message);

}  // namespace parity::minifier
