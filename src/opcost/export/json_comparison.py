"""`opcost.comparison/1`: the result of `opcost ab` and `opcost compare`.

History of the format (readers ignore unknown fields):
  opcost.comparison/1 (0.1.0): schema, opcost_version, kind (ab|compare),
    interleaved, aa (A and B identical), a / b ({label, run_id, params or
    created}), delta_requested, env (ab) or env_a / env_b / env_differences
    (compare), comparisons[] of {bench, key, op, a: {params, summary},
    b: {params, summary}, ratio (B/A of medians), ci95_ratio, change,
    p_value (min of Mann-Whitney and KS), p_mannwhitney, p_ks, p_adjusted
    (Holm), aa_noise, delta (effective), verdict (faster|slower|same|
    negligible|inconclusive, B relative to A; null when an arm has no
    data, with `status`), processes_needed and schedule when inconclusive,
    flags, savings}, summary {geomean_ratio, n, counts}.
"""

from __future__ import annotations

from .json_result import serialize  # same encoding

SCHEMA = "opcost.comparison/1"

__all__ = ["SCHEMA", "serialize"]
