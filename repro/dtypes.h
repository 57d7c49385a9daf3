// Dtype names as the repro format and the text form spell them.
#pragma once

#include <c10/core/ScalarType.h>

#include <string>

#include "util/status.h"

namespace parity::ir {

// "float32" <-> c10::ScalarType::Float (torch's spelling).
[[nodiscard]] Expected<c10::ScalarType> ParseTorchDtype(const std::string& name);
std::string TorchDtypeName(c10::ScalarType t);
std::string ShortDtypeName(c10::ScalarType t);  // "f32", "bf16", "i64", ...

}  // namespace parity::ir
