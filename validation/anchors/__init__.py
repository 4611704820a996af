"""validation/anchors: opcost against perf bench, hackbench and lmbench.

  run.py        the script: options, the interleaved runs, the report
  catalogue.py  which opcost spec is compared with which anchor command
  parsers.py    anchor output -> ns per operation
  sides.py      one opcost measurement, one anchor run
  sizing.py     proc.fork's parent sized like the anchor's process
  summary.py    the runs of a row -> figures, verdict, markdown line
"""
