"""What the validation scripts share:

  script.py      their edges: log lines, one-line errors and exit codes, the CPU they run on
  checkout.py    opcost from this checkout (or on PATH), `opcost ab`, the probe's header
  cpushare.py    one program run timed, and how much of the CPU a side got
  interleave.py  interleaved opcost/other-tool pairs, run again while disturbed, in shuffled rounds
  tables.py      the aligned text table and the --json document
  reference.py   a hand-written C reference and opcost at the same batch protocol
  refcompare.py  compare_main: the whole comparison against a reference (overhead/, instructions/)
"""
