# Finds libtorch inside the torch wheel of a Python interpreter and exposes it as the
# imported target `parity_torch`.
#
# Contract: we never call find_package(Torch). For a CUDA wheel that package looks for the
# CUDA toolkit (nvcc); a user's machine may not have one. parity only needs the headers and the
# shared libraries; CUDA kernels are reached through the dispatcher, so linking libtorch_cuda
# (when the wheel has it) is enough to run on a GPU.
#
# Inputs:  PARITY_PYTHON (cache path, default <source>/.venv/bin/python; under `pip install .`
#          the Python installed into)
# Outputs: parity_torch target, PARITY_TORCH_VERSION, PARITY_TORCH_HAS_CUDA, PARITY_TORCH_GIT (the
#          build's git hash), PARITY_TORCH_CUDA (its CUDA version, or "none")

set(PARITY_PYTHON "${CMAKE_SOURCE_DIR}/.venv/bin/python" CACHE FILEPATH
    "Python interpreter whose torch wheel provides libtorch")
# `pip install .` (scikit-build-core, pyproject.toml) builds against the Python it installs into,
# also when its kept build dir (build-pip/) was configured for another environment.
if(DEFINED SKBUILD AND Python_EXECUTABLE)
  set(PARITY_PYTHON "${Python_EXECUTABLE}" CACHE FILEPATH "Python interpreter whose torch wheel provides libtorch" FORCE)
endif()

execute_process(
  COMMAND "${PARITY_PYTHON}" -c
    "import os, torch; d=os.path.dirname(torch.__file__); print(d); print(torch.__version__); print(int(torch._C._GLIBCXX_USE_CXX11_ABI)); print(int(torch.version.cuda is not None)); print(torch.version.git_version or 'unknown'); print(torch.version.cuda or 'none')"
  OUTPUT_VARIABLE _tw_out
  RESULT_VARIABLE _tw_rc
  ERROR_VARIABLE _tw_err
  OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT _tw_rc EQUAL 0)
  message(FATAL_ERROR "parity: cannot import torch with ${PARITY_PYTHON}: ${_tw_err}\n"
                      "Run ./setup.sh first, or pass -DPARITY_PYTHON=/path/to/python.")
endif()
string(REPLACE "\n" ";" _tw_lines "${_tw_out}")
list(GET _tw_lines 0 PARITY_TORCH_DIR)
list(GET _tw_lines 1 PARITY_TORCH_VERSION)
list(GET _tw_lines 2 _tw_abi)
list(GET _tw_lines 3 PARITY_TORCH_HAS_CUDA)
list(GET _tw_lines 4 PARITY_TORCH_GIT)
list(GET _tw_lines 5 PARITY_TORCH_CUDA)

foreach(_hdr c10/core/TensorImpl.h torch/csrc/autograd/variable.h ATen/core/dispatch/Dispatcher.h)
  if(NOT EXISTS "${PARITY_TORCH_DIR}/include/${_hdr}")
    message(FATAL_ERROR "parity: the torch wheel at ${PARITY_TORCH_DIR} lacks include/${_hdr}; "
                        "this build of torch cannot be used from C++ (see docs/setup.md).")
  endif()
endforeach()

set(_tw_libs)
foreach(_lib torch torch_cpu c10 torch_cuda c10_cuda)
  set(_path "${PARITY_TORCH_DIR}/lib/lib${_lib}.so")
  if(EXISTS "${_path}")
    list(APPEND _tw_libs "${_path}")
  endif()
endforeach()

add_library(parity_torch INTERFACE)
target_include_directories(parity_torch SYSTEM INTERFACE
  "${PARITY_TORCH_DIR}/include"
  "${PARITY_TORCH_DIR}/include/torch/csrc/api/include")
target_compile_definitions(parity_torch INTERFACE _GLIBCXX_USE_CXX11_ABI=${_tw_abi})
# AT_PER_OPERATOR_HEADERS: ATen's own headers (TensorOperators.h, TensorIndexing.h, ...) include
# the one ATen/ops/<op>.h each needs instead of ATen/Functions.h, every operator of ATen: about
# 8 CPU-s of parsing in each translation unit that reaches it. parity's sources include the
# ATen/ops/<op>.h of each free function they call (never ATen/ATen.h or ATen/Functions.h).
target_compile_definitions(parity_torch INTERFACE AT_PER_OPERATOR_HEADERS)
# ATen's parallel_for is a header template over OpenMP (AT_PARALLEL_OPENMP): code that calls it
# must be compiled with -fopenmp or it silently runs serially. At run time the rpath resolves
# libgomp.so.1 to the wheel's own copy, the one libtorch_cpu uses.
# Clang's -fopenmp emits calls into LLVM's libomp (__kmpc_*), a second runtime beside the
# wheel's libgomp; so a clang build (the sanitizer and fuzz build) compiles without it: omp.h
# (libomp-dev) still declares the omp_* calls, libgomp answers them, and parity's own
# parallel_for loops run serially there (`omp simd` still vectorizes: -fopenmp-simd).
if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  target_compile_options(parity_torch INTERFACE -fopenmp-simd)
else()
  target_compile_options(parity_torch INTERFACE -fopenmp)
  target_link_options(parity_torch INTERFACE -fopenmp)
endif()
# --no-as-needed: libtorch_cuda registers its kernels from static initialisers; nothing
# references it by symbol, so an as-needed link would drop it.
target_link_options(parity_torch INTERFACE "LINKER:--no-as-needed" "LINKER:-rpath,${PARITY_TORCH_DIR}/lib")
target_link_libraries(parity_torch INTERFACE ${_tw_libs})
message(STATUS "parity: torch ${PARITY_TORCH_VERSION} at ${PARITY_TORCH_DIR} (cuda=${PARITY_TORCH_HAS_CUDA})")

# NativeRT: some wheels ship torch/nativert/ModelRunnerHandle.h without the symbols behind it
# (torch 2.13.0+cpu does). Link a probe to know whether the nativert backend can be built.
include(CheckCXXSourceCompiles)
set(CMAKE_REQUIRED_INCLUDES "${PARITY_TORCH_DIR}/include" "${PARITY_TORCH_DIR}/include/torch/csrc/api/include")
set(CMAKE_REQUIRED_LIBRARIES ${_tw_libs})
set(CMAKE_REQUIRED_DEFINITIONS -D_GLIBCXX_USE_CXX11_ABI=${_tw_abi})
set(CMAKE_REQUIRED_FLAGS "-std=c++20")
set(CMAKE_REQUIRED_QUIET ON)
check_cxx_source_compiles([[
#include <torch/nativert/ModelRunnerHandle.h>
int main(int argc, char**) {
  if (argc > 5) { torch::nativert::ModelRunnerHandle h("p", "m"); (void)h.runWithFlatInputsAndOutputs({}); }
  return 0;
}]] PARITY_TORCH_HAS_NATIVERT)
unset(CMAKE_REQUIRED_INCLUDES)
unset(CMAKE_REQUIRED_LIBRARIES)
unset(CMAKE_REQUIRED_DEFINITIONS)
unset(CMAKE_REQUIRED_FLAGS)
if(PARITY_TORCH_HAS_NATIVERT)
  target_compile_definitions(parity_torch INTERFACE PARITY_TORCH_HAS_NATIVERT=1)
else()
  target_compile_definitions(parity_torch INTERFACE PARITY_TORCH_HAS_NATIVERT=0)
endif()
message(STATUS "parity: NativeRT handle usable: ${PARITY_TORCH_HAS_NATIVERT}")
