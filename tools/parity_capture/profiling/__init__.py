"""`parity profile`'s Python side: where a compiled graph spends its time, next to eager.

    python -m parity_capture.profiling REQUEST.json RESULT.json

One process per profile, started by parity with a deadline, so a backend that crashes or hangs
ends this process and not parity. It reports facts; parity (profile/) turns them into shares,
categories, tables and records. One module per concern:

  categories   a kernel's category from its generated code
  provenance   the graph nodes each kernel computes (forward and backward)
  timing       timed iterations, peak memory (the step: runs.iteration)
  kineto       the profiler's events as rows: device time, owners, phases
  trace        the merged chrome trace
  compile      torch.compile as verify runs the backend, with profiling settings
  kernel       --kernel: one kernel benchmarked alone
  run          the steps of one profile
  __main__     the request and result files
"""
