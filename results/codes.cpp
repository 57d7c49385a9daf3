#include "results/codes.h"

#include "util/names.h"

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

const char* ToString(Code c) { return NameIn(kCodes, c); }

Expected<Code> ParseCode(const std::string& s) {
  if (auto c = ValueIn(kCodes, s)) return *c;
  return Error::BadInput("unknown verification code \"" + s + "\"");
}

bool IsFailure(Code c) { return c != Code::kPass && c != Code::kVerifierSkipped; }

}  // namespace parity::results
