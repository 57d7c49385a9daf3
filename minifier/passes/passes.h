// Factories of the delta passes listed in passes.def, one file each.
#pragma once

#include "minifier/delta.h"

namespace parity::minifier {

DeltaPass ReplaceWithPlaceholdersPass();
DeltaPass RemoveOutputsPass();
DeltaPass EliminateDeadCodePass();

}  // namespace parity::minifier
