// Symbolic sizes in a run: size arithmetic (sym:: targets) evaluated with Python's semantics,
// and the binding of a symbolic graph's symbols before a run (BindSymbols, interpreter.h).
// Internal to interpreter/.
#pragma once

#include <ATen/core/ivalue.h>

#include <set>
#include <string>
#include <vector>

#include "util/status.h"

namespace parity::interp::detail {

// The size operations sym:: targets name (sym::mul, ...).
const std::set<std::string>& SymOps();
// Them as a list for messages.
std::string SymOpList();

// One size operation (`target`, "sym::<op>") on its operands' values, in Python's semantics:
// floor division and modulo round toward -inf; an int op int stays int, any float makes a
// float, comparisons give bools, & | ^ of integers their bits; sym_sum's list comes flattened.
// `where` names the node in errors.
[[nodiscard]] Expected<c10::IValue> EvalSym(const std::string& target, const std::vector<c10::IValue>& v, const std::string& where);

}  // namespace parity::interp::detail
