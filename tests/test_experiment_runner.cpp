// experiment/runner.cpp: which results leave their process unfit for the next experiment (a job
// server is replaced after them), and how a job's outcome becomes a result.
#include "experiment/runner.h"

#include <gtest/gtest.h>

namespace parity::experiment {
namespace {

ExperimentResult With(results::Code code, std::string error) {
  ExperimentResult r;
  r.code = code;
  r.error = std::move(error);
  return r;
}

TEST(Runner, ACudaErrorOrOutOfMemoryPoisonsItsProcess) {
  using results::Code;
  EXPECT_TRUE(PoisonsItsProcess(With(Code::kExceptionRaised, "RuntimeError: CUDA error: an illegal memory access was encountered")));
  EXPECT_TRUE(PoisonsItsProcess(With(Code::kExceptionRaised, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB")));
  EXPECT_TRUE(PoisonsItsProcess(With(Code::kEagerFailed, "eager 1st run: CUBLAS_STATUS_EXECUTION_FAILED when calling cublasSgemm")));
  EXPECT_TRUE(PoisonsItsProcess(With(Code::kExceptionRaised, "fault injected: DefaultCPUAllocator: can't allocate memory: failed to allocate 1 TB")));
  // The CPU allocator's own words (an allocation the machine cannot hold).
  EXPECT_TRUE(PoisonsItsProcess(With(Code::kExceptionRaised, "DefaultCPUAllocator: can't allocate memory: you tried to allocate 4503599627370496 bytes")));
  // A failure of the backend's values, or an ordinary exception, leaves the process as it was.
  EXPECT_FALSE(PoisonsItsProcess(With(Code::kFail, "CUDA error in the message of a FAIL is only text")));
  EXPECT_FALSE(PoisonsItsProcess(With(Code::kExceptionRaised, "InductorError: CppCompileError: C++ compile error")));
  EXPECT_FALSE(PoisonsItsProcess(With(Code::kPass, "")));
}

TEST(Runner, AJobThatDiedIsVerifierDidntRunSayingHow) {
  runtime::JobOutcome o;
  o.how.signal = 11;
  o.phase = "backend";
  o.log_tail = "Segmentation fault";
  const ExperimentResult r = ResultOf(o);
  EXPECT_EQ(r.code, results::Code::kVerifierDidntRun);
  EXPECT_EQ(r.signal, 11);
  EXPECT_NE(r.error.find("during backend"), std::string::npos) << r.error;
  runtime::JobOutcome hung;
  hung.how.timed_out = true;
  hung.timeout_s = 3;
  EXPECT_NE(ResultOf(hung).error.find("timed out after 3 s"), std::string::npos);
}

}  // namespace
}  // namespace parity::experiment
