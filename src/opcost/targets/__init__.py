"""Where the probe runs: a `Target` (base.py) answers everything opcost asks
of a machine (its benchmark table, CPUs, environment) and starts its probe
processes. local.py: this machine; replay.py: scripted answers, no probe, no
subprocess (tests of the runner and the recorder)."""
