// flex_attention(query, key, value, score_mod, block_mask, scale, kernel_options,
// score_mod_other_buffers, mask_mod_other_buffers) -> (out, logsumexp, max_scores), by its math
// definition, step for step as torch's eager implementation computes it
// (torch/_higher_order_ops/flex_attention.py, math_attention): key and value repeated for grouped
// heads, the scores in float32 (float64 for float64 inputs), scaled, the score function applied
// where the mask function allows and -inf elsewhere, a safe softmax, and the output in the
// query's dtype. Torch vmaps the two functions over (b, h, q_idx, kv_idx); here they run once on
// index tensors shaped to broadcast over the scores, which gives the same values for the
// elementwise functions score and mask functions are. The block mask's tensors only tell a fused
// kernel which blocks to skip; its last item is the mask function.
#include <ATen/ops/all.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/full.h>
#include <ATen/ops/logsumexp.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/max.h>
#include <ATen/ops/repeat_interleave.h>
#include <ATen/ops/where.h>
#include <ATen/ops/_safe_softmax.h>

#include <cmath>

#include "interpreter/hops.h"

namespace parity::interp::detail {

using ir::Arg;
using ir::Node;

namespace {

// The score and mask functions on broadcast index tensors: b [B,1,1,1], h [1,H,1,1],
// q_idx [1,1,M,1], kv_idx [1,1,1,N] (int64, on the scores' device).
std::vector<c10::IValue> Indices(const at::Tensor& scores) {
  const auto opts = at::TensorOptions().dtype(at::kLong).device(scores.device());
  std::vector<c10::IValue> out;
  for (int64_t d = 0; d < 4; ++d) {
    std::vector<int64_t> shape(4, 1);
    shape[d] = scores.size(d);
    out.emplace_back(at::arange(scores.size(d), opts).view(shape));
  }
  return out;
}

std::vector<c10::IValue> With(std::vector<c10::IValue> head, const std::vector<c10::IValue>& tail) {
  head.insert(head.end(), tail.begin(), tail.end());
  return head;
}

}  // namespace

Expected<HopKernel> CompileFlexAttention(const Node& n, const std::string& where, const Subprograms& subs) {
  if (n.args.size() != 9)
    return Error::BadInput(where + ": flex_attention takes (query, key, value, score_mod, block_mask, scale, kernel_options, "
                                   "score_mod_other_buffers, mask_mod_other_buffers)");
  PARITY_ASSIGN_OR_RETURN(const Program* score_mod, SubprogramOf(n.args[3], where, subs));
  const Arg& block_mask = n.args[4];
  if (block_mask.kind != Arg::Kind::kList || block_mask.list.empty())
    return Error::BadInput(where + ": flex_attention's block_mask is not a tuple ending in its mask function");
  PARITY_ASSIGN_OR_RETURN(const Program* mask_mod, SubprogramOf(block_mask.list.back(), where, subs));
  const size_t score_buffers = n.args[7].kind == Arg::Kind::kList ? n.args[7].list.size() : 0;
  const size_t mask_buffers = n.args[8].kind == Arg::Kind::kList ? n.args[8].list.size() : 0;
  if (score_mod->graph().placeholders().size() != 5 + score_buffers)
    return Error::BadInput(where + ": the score function takes " + std::to_string(score_mod->graph().placeholders().size()) +
                           " operands, expected (score, b, h, q_idx, kv_idx) and " + std::to_string(score_buffers) + " buffers");
  if (mask_mod->graph().placeholders().size() != 4 + mask_buffers)
    return Error::BadInput(where + ": the mask function takes " + std::to_string(mask_mod->graph().placeholders().size()) +
                           " operands, expected (b, h, q_idx, kv_idx) and " + std::to_string(mask_buffers) + " buffers");
  const Arg q_arg = n.args[0], k_arg = n.args[1], v_arg = n.args[2], scale_arg = n.args[5];
  const Arg score_buf_arg = n.args[7], mask_buf_arg = n.args[8];
  return HopKernel([=](const HopEnv& env) -> Expected<c10::IValue> {
    const at::Tensor query = env.value(q_arg).toTensor();
    at::Tensor key = env.value(k_arg).toTensor(), value = env.value(v_arg).toTensor();
    const c10::IValue s = env.value(scale_arg);
    const double scale = s.isDouble() ? s.toDouble() : s.isInt() ? static_cast<double>(s.toInt()) : 1.0 / std::sqrt(query.size(-1));
    // Grouped heads share key and value; a batch of one key/value broadcasts over the queries'.
    const int64_t groups = query.size(1) / key.size(1);
    value = at::repeat_interleave(value, groups, 1);
    key = at::repeat_interleave(key, groups, 1);
    const int64_t bq = query.size(0), bkv = key.size(0);
    if (!(bq == bkv || (bq > 1 && bkv == 1)))
      return Error::Runtime(where + ": the query's batch " + std::to_string(bq) + " and the key's " + std::to_string(bkv) +
                            " do not broadcast");
    std::vector<int64_t> kshape = key.sizes().vec(), vshape = value.sizes().vec();
    kshape[0] = vshape[0] = bq;
    key = key.expand(kshape);
    value = value.expand(vshape);

    const auto working = query.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
    at::Tensor scores = at::matmul(query.to(working), key.to(working).transpose(-2, -1));
    scores = scores.mul(scale).to(working);
    const std::vector<c10::IValue> idx = Indices(scores);
    PARITY_ASSIGN_OR_RETURN(auto mask, mask_mod->RunPositional(With(idx, Items(env.value(mask_buf_arg))), env.attrs, env.options));
    PARITY_ASSIGN_OR_RETURN(auto scored,
                            score_mod->RunPositional(With(With({scores}, idx), Items(env.value(score_buf_arg))), env.attrs, env.options));
    if (mask.size() != 1 || scored.size() != 1 || !mask[0].isTensor() || !scored[0].isTensor())
      return Error::Runtime(where + ": the score and mask functions must each return one tensor");
    const at::Tensor minus_inf = at::full({}, -std::numeric_limits<double>::infinity(), scores.options());
    at::Tensor post = at::where(mask[0].toTensor(), scored[0].toTensor(), minus_inf);

    // Fully masked rows: logsumexp -inf (not nan), probabilities 0 (the safe softmax).
    at::Tensor lse = at::logsumexp(post, {-1});
    const at::Tensor masked_rows = at::all(post.eq(-std::numeric_limits<double>::infinity()), -1);
    lse = at::where(masked_rows, minus_inf, lse);
    const at::Tensor max_scores = std::get<0>(at::max(post, -1));
    post = at::_safe_softmax(post, -1);
    const at::Tensor out = at::matmul(post.to(query.scalar_type()), value.to(query.scalar_type()));
    const double ln2 = std::log(2.0);  // the fused kernels work in log2 space; the op returns it so
    return c10::IValue(c10::ivalue::Tuple::create(std::vector<c10::IValue>{out, lse.div(ln2), max_scores.div(ln2)}));
  });
}

}  // namespace parity::interp::detail
