// Precompiled header: the heavy libtorch headers every translation unit of parity needs.
#pragma once
#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <nlohmann/json.hpp>
#include <map>
#include <string>
#include <vector>
