# Warning and sanitizer settings as INTERFACE targets, linked to parity's own code only.
add_library(parity_warnings INTERFACE)
target_compile_options(parity_warnings INTERFACE -Wall -Wextra -Wpedantic -Wno-unused-parameter)
option(PARITY_WERROR "Treat warnings as errors (dev and CI)" OFF)
if(PARITY_WERROR)
  target_compile_options(parity_warnings INTERFACE -Werror)
endif()

add_library(parity_sanitizers INTERFACE)
option(PARITY_SANITIZE "Build with address and undefined-behaviour sanitizers" OFF)
option(PARITY_FUZZ "Build the libFuzzer targets in fuzz/ (clang only; implies PARITY_SANITIZE)" OFF)
if(PARITY_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "parity: PARITY_FUZZ needs clang (libFuzzer): configure with CXX=clang++")
  endif()
  set(PARITY_SANITIZE ON)
  # Coverage feedback for libFuzzer on parity's own code; libFuzzer's main is linked by the targets.
  target_compile_options(parity_sanitizers INTERFACE -fsanitize=fuzzer-no-link)
endif()
if(PARITY_SANITIZE)
  # Undefined behaviour aborts (no recovery), so a test or a fuzz target fails on the first report.
  target_compile_options(parity_sanitizers INTERFACE -fsanitize=address,undefined -fno-sanitize-recover=undefined
                                                     -fno-omit-frame-pointer)
  target_link_options(parity_sanitizers INTERFACE -fsanitize=address,undefined)
  if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    # The comparator's vectorize pragma cannot be honoured under instrumentation; not an error there.
    target_compile_options(parity_sanitizers INTERFACE -Wno-pass-failed)
  endif()
endif()
option(PARITY_GLIBCXX_ASSERTIONS "Enable libstdc++ assertions" OFF)
if(PARITY_GLIBCXX_ASSERTIONS)
  target_compile_definitions(parity_sanitizers INTERFACE _GLIBCXX_ASSERTIONS)
endif()
