#!/usr/bin/env bash
# opcost's regression gate: `opcost variants` (a program of yours, at the base
# and at the head of a pull request) or `opcost ab` (benchmarks, e.g. two
# kernels through the vm target) between base and head; fails on `slower`.
# Run by ci/github/action.yml (GitHub Actions) and ci/gitlab/opcost-gate.yml
# (GitLab CI); runnable by hand. docs/ci-gate.md says how to use it.
#
# Inputs (environment):
#   OPCOST_GATE_SOURCE     variants mode: the C or assembly source in the repository
#                          (defines main, or uint64_t opcost_op(uint64_t x))
#   OPCOST_GATE_AB         ab mode: the arguments of `opcost ab`, e.g.
#                          "signal.catch ctx.pipe --a kernel=base/bzImage --b kernel=head/bzImage"
#   OPCOST_GATE_BASE       the base commit (variants mode); default: the pull
#                          request's (GitHub: from $GITHUB_EVENT_PATH; GitLab:
#                          $CI_MERGE_REQUEST_DIFF_BASE_SHA)
#   OPCOST_GATE_ARGS       more options for opcost (-p 20, --cpu 1, --delta 0.05, ...)
#   OPCOST_GATE_OUT        where the JSON and the markdown go (default: opcost-gate)
#   OPCOST_GATE_UNDECIDED  pass (default) or fail: what an inconclusive verdict does
#   OPCOST                 the opcost command (default: opcost)
# Outputs: $OPCOST_GATE_OUT/opcost-gate.json (opcost.comparison/1) and
# opcost-gate.md (the markdown report and the gate's verdict line), appended to
# $GITHUB_STEP_SUMMARY where set; verdict= and json= in $GITHUB_OUTPUT where set.
# Exit: 0 no benchmark slower (1 with OPCOST_GATE_UNDECIDED=fail when one is
# undecided); 1 slower; 2 bad input; opcost's own exit code when it fails.
set -euo pipefail

die() { echo "opcost-gate: $*" >&2; exit 2; }
read -r -a OPCOST_CMD <<<"${OPCOST:-opcost}"
read -r -a EXTRA <<<"${OPCOST_GATE_ARGS:-}"
out=${OPCOST_GATE_OUT:-opcost-gate}
undecided=${OPCOST_GATE_UNDECIDED:-pass}
case $undecided in pass|fail) ;; *) die "OPCOST_GATE_UNDECIDED=$undecided: give pass or fail" ;; esac
if [ -n "${OPCOST_GATE_SOURCE:-}" ] && [ -n "${OPCOST_GATE_AB:-}" ]; then
    die "give OPCOST_GATE_SOURCE (a program, variants) or OPCOST_GATE_AB (opcost ab's arguments), not both"
fi
mkdir -p "$out"
json=$out/opcost-gate.json
md=$out/opcost-gate.md
rm -f "$json" "$md"

if [ -n "${OPCOST_GATE_SOURCE:-}" ]; then
    src=$OPCOST_GATE_SOURCE
    [ -f "$src" ] || die "OPCOST_GATE_SOURCE=$src: no such file at the head"
    base=${OPCOST_GATE_BASE:-}
    if [ -z "$base" ] && [ -n "${GITHUB_EVENT_PATH:-}" ] && [ -f "$GITHUB_EVENT_PATH" ]; then
        base=$(python3 -c 'import json,sys; print(((json.load(open(sys.argv[1])).get("pull_request") or {}).get("base") or {}).get("sha") or "")' "$GITHUB_EVENT_PATH")
    fi
    base=${base:-${CI_MERGE_REQUEST_DIFF_BASE_SHA:-}}
    [ -n "$base" ] || die "no base commit: set OPCOST_GATE_BASE (or run on a pull/merge request)"
    top=$(git rev-parse --show-toplevel)
    rel=$(realpath --relative-to="$top" "$src")
    if ! git cat-file -e "$base^{commit}" 2>/dev/null; then
        git fetch -q --depth=1 origin "$base" || die "base commit $base is not here and cannot be fetched (checkout with fetch-depth: 0)"
    fi
    git cat-file -e "$base:$rel" 2>/dev/null || die "$rel does not exist at the base $base: nothing to compare with"
    tree=$(mktemp -d "${TMPDIR:-/tmp}/opcost-gate-base.XXXXXX")
    trap 'git worktree remove --force "$tree" >/dev/null 2>&1 || rm -rf "$tree"' EXIT
    git worktree add -q --detach "$tree" "$base"
    # One source, two builds: -DBASE includes the base's file (in a checkout of
    # the base, so its own #includes resolve there), -DHEAD the head's.
    gate=$out/gate.c
    printf '#if defined(BASE)\n#include "%s"\n#elif defined(HEAD)\n#include "%s"\n#endif\n' \
        "$tree/$rel" "$(realpath "$src")" >"$gate"
    echo "opcost-gate: $rel at the base ${base:0:12} (-DBASE) against the head (-DHEAD)" >&2
    "${OPCOST_CMD[@]}" variants "$gate" -D BASE -D HEAD --no-store --no-progress --json "$json" \
        --export "markdown:$md" "${EXTRA[@]}"
elif [ -n "${OPCOST_GATE_AB:-}" ]; then
    read -r -a AB <<<"$OPCOST_GATE_AB"
    echo "opcost-gate: opcost ab ${OPCOST_GATE_AB}" >&2
    "${OPCOST_CMD[@]}" ab "${AB[@]}" --no-store --no-progress --json "$json" --export "markdown:$md" "${EXTRA[@]}"
else
    die "nothing to compare: set OPCOST_GATE_SOURCE (a program) or OPCOST_GATE_AB (opcost ab's arguments)"
fi

# The verdicts: slower fails; inconclusive (or withheld) is undecided.
read -r verdict slower undecided_n < <(python3 - "$json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
v = [c.get("verdict") for c in doc.get("comparisons", [])]
slower = sum(x == "slower" for x in v)
undecided = sum(x not in ("slower", "faster", "same", "negligible") for x in v)
print("slower" if slower else "undecided" if undecided else "ok", slower, undecided)
PY
)
case $verdict in
    slower) line="**opcost gate: failed**: $slower benchmark(s) slower at the head than at the base" ;;
    undecided) line="**opcost gate: undecided**: $undecided benchmark(s) inconclusive (more processes, -p in OPCOST_GATE_ARGS, would decide them)" ;;
    *) line="**opcost gate: passed**: no benchmark slower at the head than at the base" ;;
esac
{ echo; echo "$line"; } >>"$md"
if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
    { echo "## opcost regression gate"; echo; cat "$md"; echo; } >>"$GITHUB_STEP_SUMMARY"
fi
if [ -n "${GITHUB_OUTPUT:-}" ]; then
    { echo "verdict=$verdict"; echo "json=$json"; } >>"$GITHUB_OUTPUT"
fi
echo "opcost-gate: $verdict (${line//\*/}); $json, $md" >&2
case $verdict in
    slower) exit 1 ;;
    undecided) [ "$undecided" = fail ] && exit 1; echo "::warning::opcost gate: undecided ($undecided_n inconclusive)"; exit 0 ;;
    *) exit 0 ;;
esac
