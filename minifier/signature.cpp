#include "minifier/signature.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "compare/same.h"

namespace parity::minifier {

const char* ToString(FailureKind k) {
  switch (k) {
    case FailureKind::kNone: return "none";
    case FailureKind::kAccuracy: return "accuracy";
    case FailureKind::kException: return "exception";
    case FailureKind::kCrash: return "crash";
    case FailureKind::kTimeout: return "timeout";
  }
  return "?";
}

std::string NormalizeMessage(const std::string& message) {
  // One linear pass over at most the first 240 characters of the first line (std::regex
  // recurses per character and overflows the stack on the long lines compilers print).
  const std::string line = message.substr(0, std::min(message.find('\n'), size_t{240}));
  auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-'; };
  std::string out;
  for (size_t i = 0; i < line.size();) {
    const char c = line[i];
    if (c == '/' && i + 1 < line.size() && word(line[i + 1])) {  // a path
      while (i < line.size() && (word(line[i]) || line[i] == '/')) ++i;
      out += "<path>";
    } else if (c == '0' && i + 2 < line.size() && line[i + 1] == 'x' && std::isxdigit(static_cast<unsigned char>(line[i + 2]))) {
      i += 2;
      while (i < line.size() && std::isxdigit(static_cast<unsigned char>(line[i]))) ++i;
      out += "<addr>";
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      while (i < line.size() && std::isdigit(static_cast<unsigned char>(line[i]))) ++i;
      out += '#';
    } else {
      out += c;
      ++i;
    }
  }
  return out;
}

namespace {

// What is wrong with a failing output: its dtype, its shape, or its values; values whose error
// its noise budget says rounding alone explains (same() fails them, the calibrated rule would
// not) are "rounding", apart from values off beyond it.
const char* AccuracyClass(const nlohmann::json& output) {
  using compare::Rule;
  const std::string rule = output.value("rule", std::string());
  if (rule == compare::ToString(Rule::kDtypeMismatch)) return "dtype";
  if (rule == compare::ToString(Rule::kShapeMismatch) || rule == compare::ToString(Rule::kStructure)) return "shape";
  const auto budget = output.find("noise_budget");
  if (budget != output.end() && budget->is_object() && budget->contains("check") && (*budget)["check"].is_object() &&
      (*budget)["check"].value("within", false))
    return "rounding";
  return "values";
}

std::vector<std::string> AccuracyClasses(const nlohmann::json& outputs) {
  std::set<std::string> classes;
  if (outputs.is_array())
    for (const auto& o : outputs)
      if (o.is_object() && !o.value("pass", true)) classes.insert(AccuracyClass(o));
  return {classes.begin(), classes.end()};
}

}  // namespace

Signature Signature::FromResult(const experiment::ExperimentResult& r) {
  using experiment::Code;
  Signature s;
  switch (r.code) {
    case Code::kFail:
      s.kind = FailureKind::kAccuracy;
      s.accuracy_classes = AccuracyClasses(r.outputs);
      break;
    case Code::kExceptionRaised:
      s.kind = FailureKind::kException;
      s.exception_type = r.exception_type;
      // The error itself: a run of several graphs names the failing one before it, and the same
      // graph run alone (graph bisection) does not.
      s.message = NormalizeMessage(!r.failed_graph.empty() && r.error.rfind(r.failed_graph + ": ", 0) == 0
                                       ? r.error.substr(r.failed_graph.size() + 2)
                                       : r.error);
      break;
    case Code::kVerifierDidntRun:
      if (r.timed_out)
        s.kind = FailureKind::kTimeout;
      else if (r.signal != 0) {
        s.kind = FailureKind::kCrash;
        s.signal = r.signal;
      }
      break;
    default: break;
  }
  return s;
}

bool Signature::Matches(const Signature& o) const {
  if (kind != o.kind || kind == FailureKind::kNone) return false;
  switch (kind) {
    case FailureKind::kException: return exception_type == o.exception_type && message == o.message;
    case FailureKind::kCrash: return signal == o.signal;
    case FailureKind::kAccuracy:
      return accuracy_classes.empty() || o.accuracy_classes.empty() ||
             std::find_first_of(accuracy_classes.begin(), accuracy_classes.end(), o.accuracy_classes.begin(),
                                o.accuracy_classes.end()) != accuracy_classes.end();
    default: return true;
  }
}

std::string Signature::Describe() const {
  switch (kind) {
    case FailureKind::kException: return "exception " + exception_type + " (" + message + ")";
    case FailureKind::kCrash: return "crash (signal " + std::to_string(signal) + ")";
    case FailureKind::kAccuracy: {
      std::string about;
      for (const auto& c : accuracy_classes) about += (about.empty() ? "" : ", ") + c;
      return about.empty() ? "accuracy" : "accuracy (" + about + ")";
    }
    default: return ToString(kind);
  }
}

nlohmann::json Signature::ToJson() const {
  nlohmann::json j = {{"kind", ToString(kind)}, {"exception_type", exception_type}, {"message", message}, {"signal", signal}};
  if (!accuracy_classes.empty()) j["accuracy_classes"] = accuracy_classes;
  return j;
}

Expected<Signature> Signature::FromJson(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("kind") || !j["kind"].is_string())
    return Error::BadInput("failure signature: field \"kind\" is missing or not a string");
  Signature s;
  const std::string k = j["kind"];
  if (k == "accuracy")
    s.kind = FailureKind::kAccuracy;
  else if (k == "exception")
    s.kind = FailureKind::kException;
  else if (k == "crash")
    s.kind = FailureKind::kCrash;
  else if (k == "timeout")
    s.kind = FailureKind::kTimeout;
  else
    return Error::BadInput("failure signature: field \"kind\" is \"" + k + "\", expected accuracy, exception, crash or timeout");
  s.exception_type = j.value("exception_type", std::string());
  s.message = j.value("message", std::string());
  s.signal = j.value("signal", 0);
  if (j.contains("accuracy_classes")) {
    const auto& c = j["accuracy_classes"];
    if (!c.is_array() || !std::all_of(c.begin(), c.end(), [](const nlohmann::json& x) { return x.is_string(); }))
      return Error::BadInput("failure signature: field \"accuracy_classes\" must be a list of strings");
    s.accuracy_classes = c.get<std::vector<std::string>>();
  }
  return s;
}

}  // namespace parity::minifier
