// The shapes a symbolic graph is verified at (--shapes): the recorded call's, and with
// `sweep[=N]` N more points of its symbols' ranges that its guards allow. A point's inputs are
// regenerated at its sizes with the captured inputs' distribution (floating: their mean and
// spread; integers: their range; booleans: their ratio), the parameters stay the captured ones;
// each point is written as a repro dir of its own (a variant), so every backend and the
// reference run it like any capture.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "repro/repro_dir.h"
#include "repro/sym_expr.h"
#include "util/status.h"

namespace parity::experiment {

// "recorded" -> 0 points beyond the recorded one; "sweep" -> 3; "sweep=N" -> N (1..64).
// kBadInput naming --shapes otherwise.
[[nodiscard]] Expected<int> ParseShapes(const std::string& text);

// Up to `count` bindings of `g`'s symbols other than the recorded hints: every symbol scaled
// together (0.5x, 2x, 1.5x, then the range's low end, 3x, ...), inside its range, each point
// holding every guard; duplicates dropped. Fewer when the ranges and guards allow fewer.
std::vector<sym::Bindings> SweepPoints(const ir::Graph& g, int count);

// "s77=12, s5=3": how records and output names show a point.
std::string PointLabel(const sym::Bindings& point);

// The seed a point's inputs are drawn with: a function of the point alone, so the failure repro
// of a point (verify/failure_repro.h) holds the very inputs the experiment failed on.
uint64_t ShapeSeed(const sym::Bindings& point);

// Whether the gradients a train graph's program fed to its outputs (tangents) fit every shape:
// each one is for an output whose size no symbol sets (a scalar loss). A graph without
// tangents holds at every shape too.
bool TangentsFitEveryShape(const GraphEntry& entry);

// `entry` at `point`, written to `dir` as a one-graph repro dir: the inputs whose dims are
// symbols regenerated at the point's sizes (seeded by `seed`), the rest and the parameters as
// captured, the symbols' hints the point's values, its tangents where they fit every shape
// (TangentsFitEveryShape; kBadInput where they do not). Expected outputs (the recorded call's do not
// fit) only with `with_expected`: the interpreter's eager outputs at the point, on the CPU.
[[nodiscard]] Status WriteShapeVariant(const ReproDir& repro, const GraphEntry& entry, const sym::Bindings& point,
                                       uint64_t seed, const std::filesystem::path& dir, bool with_expected = false);

}  // namespace parity::experiment
