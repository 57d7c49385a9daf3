// Precompiled header: the heavy libtorch headers every translation unit of parity needs.
#pragma once
#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>
