// Operand conversion by schema: how each argument of an op node becomes what the op's kernel
// takes (Program::Compile builds them once; a run materializes them). Internal to interpreter/.
#pragma once

#include <ATen/core/function_schema.h>
#include <ATen/core/ivalue.h>

#include <string>
#include <vector>

#include "interpreter/interpreter.h"
#include "repro/graph.h"
#include "util/status.h"

namespace parity::interp::detail {

// How one stack slot is produced at run time.
struct Operand {
  enum class Kind {
    kConst,          // `constant`
    kDtype,          // `constant` is a ScalarType; float64 mode widens floating ones
    kDevice,         // `constant` is a Device; replaced by the run's device
    kNode,           // the value of node `refs[0]`
    kTensorList,     // Tensor[] gathered from `refs`
    kOptTensorList,  // Tensor?[] gathered from `refs` (-1 = None)
    kIntList,        // int[] of sizes: `ints[k]`, or the size value of node `refs[k]` where it is >= 0
    kNumberTensor,   // a Tensor argument given a size value (node `refs[0]`): a wrapped number, as Python does
  };
  Kind kind = Kind::kConst;
  c10::IValue constant;
  std::vector<int> refs;
  std::vector<int64_t> ints = {};
};

// A Python number where a Tensor is expected (a constant, or a size computed at run time): a
// 0-dim tensor flagged as a wrapped number, so type promotion treats it as torch does a scalar
// (an int does not make a float tensor double; a float does not widen a float32 tensor).
at::Tensor WrappedNumber(const c10::IValue& v);

// The operand of schema argument `schema_arg` given `a`: BadInput naming `where` and the argument
// when it does not fit the argument's type, Unsupported for a type the interpreter cannot pass.
[[nodiscard]] Expected<Operand> BuildOperand(const std::string& where, const c10::Argument& schema_arg, const ir::Arg& a);

// An operand's value for this run: constants as compiled, dtypes and devices following the
// run's float64 mode and device, node values from the frame.
c10::IValue Materialize(const Operand& o, const std::vector<c10::IValue>& frame, const RunOptions& options);

}  // namespace parity::interp::detail
