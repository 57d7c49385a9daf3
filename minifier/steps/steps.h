// The minify pipeline's steps, one file each, over the shared ReductionState. Each states what
// it reads and what it sets; a step that cannot go on returns an error (Runtime: nothing to
// minify, or the failure needs what was cut).
#pragma once

#include "minifier/reduction.h"

namespace parity::minifier {

// Before the other steps, with -j 2 or more: the runs whose experiments are known now, in one
// batch through ctx.ahead: the divergence scan's first runs on the original graph first (its
// first -j segments, or, on a machine with two cores per slot, the whole graph's run of a graph
// too small to split: the longest compiles; only for one eval graph the repro dir says failed on
// accuracy, without calls to inline), then the confirmations (in one slot,
// one after another: the later ones find the first's compile) and the stage runs in the others.
// The steps that judge them get these results when they ask (minifier/ahead.h).
[[nodiscard]] Status RunAhead(StepContext& ctx, ReductionState& state);

// The confirmations' experiments (Confirm runs them; RunAhead may run them first).
experiment::ExperimentBatch ConfirmBatch(const StepContext& ctx, const ReductionState& state);

// The original must fail, the same way, reliably: options.confirm_runs runs (or the --check
// command once). Sets original, confirm. Flaky originals stop unless --majority.
[[nodiscard]] Status Confirm(StepContext& ctx, ReductionState& state);

// eager -> aot_eager -> aot_eager_decomp_partition -> the backend on the original: the first
// stage that fails the same way names the layer at fault. Sets stages, first_failing_stage.
[[nodiscard]] Status StageBisect(StepContext& ctx, ReductionState& state);
// Its experiments, one per stage before the backend.
experiment::ExperimentBatch StageBatch(const StepContext& ctx, const ReductionState& state);

// The first graph that fails alone on its captured inputs (the only one if there is one).
// Sets graph_index and current.
[[nodiscard]] Status GraphBisect(StepContext& ctx, ReductionState& state);

// The prefix of `g` up to node `node_index`, returning every single tensor value nothing inside
// it reads (so no node of it is dead). (A train candidate's backward is the writer's:
// CandidateWriter feeds each value the gradient the original's backward gave it.)
std::optional<ir::Graph> SinksPrefix(const ir::Graph& g, size_t node_index);

// The culprit alone: its tensor inputs become placeholders fed with the reference's values (its
// parameters stay), returning it.
std::optional<ir::Graph> CulpritAlone(const ir::Graph& g, const ir::Node& culprit);

// Before localization: the graph's cond, invoke_subgraph and checkpoint calls replaced by their
// subgraphs' nodes (passes/inline_subgraphs.cpp) where the graph still fails the same way (all
// at once, else one at a time), so the scan and the bisection walk into them; a call the failure
// needs stays. Sets current and inlined.
[[nodiscard]] Status InlineSubgraphsStep(StepContext& ctx, ReductionState& state, Interestingness& test);

// Before node bisection (eval, accuracy failures, the backend as judge): backend runs returning
// every single floating tensor value `current` computes (an evenly spaced sample of
// options.scan_max of them on bigger graphs), compared node by node with eager and fp64; the
// first value that fails same() is the candidate culprit. In two levels: first the graph's
// segments (ScanSegments, 2 x -j of them), each fed with the reference's values, -j at a time in
// graph order until one fails the same way (a segment compiles in a fraction of the graph's time,
// and a culprit early in the graph needs only the first); its candidate is confirmed when alone
// on its input values it fails the same way and its segment's part before it does not. Where the
// graph is too small to split, no segment fails (the error builds up across them) or the
// confirmation does not hold, the whole graph's values in one run, its candidate confirmed by
// one batch (alone it fails the same way, the prefix before it does not; its own prefix is tried
// when it does not fail alone). Sets divergence (the per-node errors of the runs that decided),
// localization and, when confirmed, culprit and current (the culprit alone, or its prefix).
// Leaves culprit unset (node bisection's turn) when exposing the values changes the failure
// (fusion changed), no exposed value fails, or the confirmation does not reproduce; says why.
[[nodiscard]] Status DivergenceScan(StepContext& ctx, ReductionState& state, Interestingness& test);
// The graph the scan's whole-graph run runs: `g` returning its outputs, then each value it
// exposes (`exposed`, when given, gets them); nullopt when there is none to expose.
std::optional<ir::Graph> ScanGraph(const ir::Graph& g, int max, std::vector<const ir::Node*>* exposed = nullptr);
// The scan's segments of `g`: its exposed values cut into `count` consecutive groups (fewer where
// a group would have under 8 values; none below 2), each group with the nodes from the previous
// group's last value to its own last (and the parameters and tuple values they read) returning
// that group; a value made before the segment becomes a placeholder, fed with the reference's
// value. `exposed`, when given, gets the groups. Empty when `g` is too small to split or a
// segment cannot be cut.
std::vector<ir::Graph> ScanSegments(const ir::Graph& g, int count, int max,
                                    std::vector<std::vector<const ir::Node*>>* exposed = nullptr);
// How many segments the scan cuts a graph into with `jobs` runs at a time.
int ScanSegmentCount(int jobs);

// The shortest failing prefix of `current` (k-ary search, options.jobs probes at a time): its
// last op is the culprit. Sets culprit and cuts `current` to the smallest of the culprit alone,
// (train) the culprit on its path with sum() as the loss, and the prefix that fails the same
// way; leaves both when the graph returning all its live values does not fail the same way.
[[nodiscard]] Status NodeBisect(StepContext& ctx, ReductionState& state, Interestingness& test);

// After the reduction: which part of the compiler the failure comes from. PyTorch's compiler
// bisector runs in the worker (ctx.ask; tools/parity_capture/compiler_bisect.py) with the
// failure's own test on the minified graph, then on the original graph when the minified one
// fails in no stage of torch.compile. A backend that is no torch.compile backend (parity's C++
// runtimes, fault) and failures a try could crash on (crash, timeout) are said so, not run.
// Sets compiler_culprit: the bisector's answer ({backend, subsystem, bisect_number, detail,
// config, on, runs, seconds}), {"none": why} or {"error": ...}, each with its "sentence".
// Never fails the minify for a bisection that could not finish.
[[nodiscard]] Status CompilerBisect(StepContext& ctx, ReductionState& state);

// The compiler culprit in one sentence ("inside inductor: lowerings #9 (relu): falling back to
// ATen for it removes the failure"): the terminal, summary.json, reports and ci notes show it.
std::string CompilerCulpritSentence(const nlohmann::json& culprit);

}  // namespace parity::minifier
