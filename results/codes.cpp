#include "results/codes.h"

#include <utility>

namespace parity::results {

namespace {
constexpr std::pair<Code, const char*> kCodes[] = {
    {Code::kPass, "PASS"},
    {Code::kFail, "FAIL"},
    {Code::kEagerFailed, "EAGER_FAILED"},
    {Code::kExceptionRaised, "EXCEPTION_RAISED"},
    {Code::kNondeterministicEagerRun, "NONDETERMINISTIC_EAGER_RUN"},
    {Code::kVerifierSkipped, "VERIFIER_SKIPPED"},
    {Code::kVerifierDidntRun, "VERIFIER_DIDNT_RUN"},
};
}  // namespace

const char* ToString(Code c) {
  for (const auto& [code, name] : kCodes)
    if (code == c) return name;
  return "?";
}

Expected<Code> ParseCode(const std::string& s) {
  for (const auto& [code, name] : kCodes)
    if (s == name) return code;
  return Error::BadInput("unknown verification code \"" + s + "\"");
}

bool IsFailure(Code c) { return c != Code::kPass && c != Code::kVerifierSkipped; }

}  // namespace parity::results
