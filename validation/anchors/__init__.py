"""validation/anchors: opcost against perf bench, hackbench and lmbench.

  run.py        the script: options, the interleaved runs, the report
  catalogue.py  which opcost spec is compared with which perf bench / hackbench command
  lmbench.py    lmbench's rows: its commands, and how each definition differs from opcost's
  model.py      a row, an anchor, the tools found here, the report's sizes (data only)
  parsers.py    anchor output -> ns per operation
  sides.py      one opcost measurement (or a difference of two), one anchor run
  sizing.py     a fork's parent sized like the anchor's process; a mapping placed like the anchor's
  summary.py    the runs of a row -> figures, verdict (ratio band, F-test), markdown line
  read_layout.py  the same read() loop in two binaries: why syscall.read is 0.96 of lat_syscall read here
  install.sh    perf, rt-tests; builds lmbench outside the repository
"""
