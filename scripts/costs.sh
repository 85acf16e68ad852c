# Sourced by scripts/setup, scripts/test and the install scripts: each set-up step, lint and type-check of a
# run, timed into $COSTS_STEPS (scripts/test sets it to .costs/steps.tsv; unset, nothing is recorded).
# The pytest plugin tests/_costs.py reads the file and prints it with the suite's costs at the end of the run.
#   t="$(costs_now)"; ...the step...; costs_record "NAME" "$t" "NOTE"
costs_now() { date +%s.%N; }
costs_record() {
    [[ -n "${COSTS_STEPS:-}" ]] || return 0
    local seconds
    seconds="$(awk -v a="$2" -v b="$(costs_now)" 'BEGIN { printf "%.1f", b - a }')"
    # One short line per append: concurrent writers (the engine and the twin build side by side) do not mix.
    printf '%s\t%s\t%s\n' "$1" "$seconds" "${3:-}" >> "$COSTS_STEPS"
}
