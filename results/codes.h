// The verification codes (PyTorch/XLA's experiment_runner): what one experiment came to.
#pragma once

#include <string>

#include "util/status.h"

namespace parity::results {

enum class Code { kPass, kFail, kEagerFailed, kExceptionRaised, kNondeterministicEagerRun, kVerifierSkipped, kVerifierDidntRun };
const char* ToString(Code c);
[[nodiscard]] Expected<Code> ParseCode(const std::string& s);
// FAIL, EAGER_FAILED, EXCEPTION_RAISED, NONDETERMINISTIC_EAGER_RUN, VERIFIER_DIDNT_RUN fail a run.
bool IsFailure(Code c);

}  // namespace parity::results
