"""One module per section of bench/run_benchmarks.py: `run(tmp, args, env) -> dict` measures, and
`render(result) -> list` (where the result has no "markdown" of its own) writes its lines of
docs/benchmarks.md."""
