// Runs a graph with parity's interpreter and returns the named results the verifier compares:
// eval -> the outputs; train -> loss, gradients of parameters and floating inputs, parameters
// after one SGD step (lr 0.01), as PyTorch's accuracy checks collect them. A train graph
// captured from a real program (GraphEntry::tangents) reports every output instead of the loss
// and runs the backward its program ran: the recorded gradients fed to the outputs, gradients
// of the inputs and parameters the program differentiated.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "interpreter/interpreter.h"
#include "experiment/backend.h"

namespace parity::experiment {

inline constexpr double kSgdLr = 0.01;

struct ReferenceOptions {
  c10::Device device{c10::kCPU};
  std::optional<c10::ScalarType> float_dtype;  // kDouble for the fp64 reference
  interp::NodeHook hook;
  uint64_t seed = 1337;
  // Set: every floating input, parameter, buffer and recorded gradient moved one ulp up or down
  // in its captured dtype, each direction drawn from this seed (a calibration run of the noise
  // budget, experiment/calibration.h: the math kept, the rounding moved).
  std::optional<uint64_t> ulp_seed;
  int64_t while_limit = 0;  // interp::RunOptions::while_limit
  // Set, in train mode: filled with the gradient each differentiated node value got in this run's
  // backward, by node name (dense, on the CPU; zeros where none reached it). What a value cut out
  // of the graph is fed as its tangent (minifier/interesting.h): the program's own backward there.
  std::map<std::string, at::Tensor>* value_grads = nullptr;
};

// `t` with each element moved one ulp up or down (directions drawn from `gen`); non-floating
// tensors unchanged.
at::Tensor UlpPerturbed(const at::Tensor& t, at::Generator& gen);

[[nodiscard]] Expected<NamedTensors> RunReference(const interp::Program& program, const ReproDir& repro, const GraphEntry& g,
                                                  const std::string& mode, const ReferenceOptions& options);

// RunReference once (its time added to `prepare_s` as the compile time), then `iterations`
// timed runs: how interpreter-executed backends report their timings.
[[nodiscard]] Expected<BackendRun> TimedReference(const interp::Program& program, const ReproDir& repro, const GraphEntry& g,
                                                  const std::string& mode, const ReferenceOptions& options, int iterations,
                                                  double prepare_s = 0.0);

}  // namespace parity::experiment
