// What every Python process parity starts (its worker, the worker's fork server, a real replay's
// ranks, `parity import`'s child) finds in its environment, beyond the caller's: where
// parity_capture is, the torch build parity was built against, and where compiled bytecode goes.
//
// Bytecode: a Python that may not write bytecode beside the sources (PYTHONDONTWRITEBYTECODE set,
// or the package's dir not writable) and finds none there compiles every module it imports from
// source, in every process. That is torch in an image installed without bytecode (pip
// --no-compile, PIP_NO_COMPILE; measured on an H200 machine, torch 2.11: importing torch, dynamo
// and Inductor took 14-16 s that way). Parity's Python processes then keep their bytecode in
// parity's own cache (PYTHONPYCACHEPREFIX = <ParityCacheDir()>/pycache), never beside the
// sources, and pay that compile once, on every core at once (PackageModuleCommand). Where torch
// has its bytecode beside it, or the caller set PYTHONPYCACHEPREFIX, nothing changes.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace parity::runtime {

// Where parity caches what outlives a run (captures, compiled artifacts, bytecode):
// $PARITY_CACHE_DIR, else $XDG_CACHE_HOME/parity, else ~/.cache/parity, else <tmp>/parity-cache.
std::filesystem::path ParityCacheDir();

// The environment parity's Python runs with, as NAME=VALUE entries over the caller's: PYTHONPATH
// with the dir holding parity_capture first (PARITY_TOOLS_DIR: the checkout's tools/, or the
// environment's site-packages after pip install), kTorchBuiltEnv (the torch build parity was built
// against, which the worker checks its own torch against: a worker of another build answers every
// request but ping with TorchMismatch, a kBadInput error naming both builds and what to rebuild),
// and BytecodeCacheEnv's entries for the torch this process runs.
std::vector<std::string> PythonEnv();
inline constexpr const char* kTorchBuiltEnv = "PARITY_TORCH_BUILT";
// The torch build parity was built against: "<version> <git hash>", as the worker compares it.
std::string BuiltTorch();

// The entries that keep bytecode in `cache_dir`/pycache (the rule above), for the torch package
// at `torch_dir` (empty: not known, nothing changes) with the caller's variables read through
// `getenv` (nullopt: unset). PYTHONDONTWRITEBYTECODE is set empty, which Python reads as unset.
std::vector<std::string> BytecodeCacheEnv(const std::filesystem::path& torch_dir,
                                          const std::function<std::optional<std::string>(const char*)>& getenv,
                                          const std::filesystem::path& cache_dir);

// The command running parity_capture's `module` (its main; the caller appends the arguments) in
// `python`: `python -m parity_capture.MODULE`; where parity keeps the bytecode (`bytecode_kept`:
// BytecodeCacheEnv's entries are in PythonEnv()), `python <tools>/parity_capture/bytecode.py
// parity_capture.MODULE`, which first compiles the packages the imports come from with a process
// per core, once per torch (on 4 cores or more: 21.4 s of serial compiling at import against 4.5 s
// on an H200 machine's 16), then runs the module as -m would.
std::vector<std::string> PackageModuleCommand(const std::string& python, const std::string& module, bool bytecode_kept);
// The same for this process's PythonEnv().
std::vector<std::string> PackageModuleCommand(const std::string& python, const std::string& module);

// The torch package whose libraries this process loaded (the dir above the one holding
// libc10.so, read from /proc/self/maps); empty when none is loaded from a torch package.
std::filesystem::path LoadedTorchPackage();

}  // namespace parity::runtime
