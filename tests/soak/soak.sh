#!/usr/bin/env bash
# soak.sh: a long scripted line-mode session (stdin piped into tokentop) that mixes prompts,
# continuations, /undo, /regen, /reset, /save + /load (JSON and plain text), /spec on|off with a
# draft model, sampler changes, long generations in a small context (context shifts) and bad
# commands. While it runs, the process's resident memory (VmRSS) and open file descriptors are
# sampled from /proc; at the end it checks that
#   - memory stays flat: the peak of the last quarter of the run exceeds the peak of the first
#     quarter by at most --rss-slack KB (default 4096),
#   - no file descriptor leaks: the count at the end equals the count after the first turns,
#   - every bad command was answered with its message on stderr,
#   - the session is still usable: after all of it, a greedy prompt gets the same reply as in a
#     fresh process, and the exit status is 0.
# Usage: tests/soak/soak.sh [--turns N] [--bin PATH] [--model DIR] [--draft DIR] [--ctx N]
#                           [--seed N] [--rss-slack KB] [--keep DIR]
# `make soak` runs the full 10,000 turns with ./tokentop; for the sanitizer build run
# tests/soak/soak.sh --bin build/asan/tokentop --turns 2000 (ASan/UBSan errors and
# LeakSanitizer's report at exit fail the run; its RSS is shown but not judged).
set -u
turns=10000 bin=./tokentop model=models/kjv-target draft=models/kjv-draft ctx=64 seed=1
slack=4096 keep=
while [ $# -gt 0 ]; do
    case "$1" in
        --turns) turns=$2; shift 2 ;;
        --bin) bin=$2; shift 2 ;;
        --model) model=$2; shift 2 ;;
        --draft) draft=$2; shift 2 ;;
        --ctx) ctx=$2; shift 2 ;;
        --seed) seed=$2; shift 2 ;;
        --rss-slack) slack=$2; shift 2 ;;
        --keep) keep=$2; shift 2 ;;
        *) echo "soak.sh: unknown option '$1'" >&2; exit 2 ;;
    esac
done
[ -x "$bin" ] || { echo "soak: $bin is not built" >&2; exit 1; }
# An AddressSanitizer build keeps freed memory in quarantine (up to 256 MB), so its RSS grows by
# design: there LeakSanitizer's report at exit judges memory, and the RSS figures are only shown.
asan=0
grep -aq __asan_init "$bin" && asan=1
work=$(mktemp -d "${TMPDIR:-/tmp}/tokentop-soak-XXXXXX")
trap 'rm -rf "$work"; [ -n "${pid:-}" ] && kill "$pid" 2>/dev/null' EXIT
export TOKENTOP_HISTORY=""
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# ---- The script. Bad commands and the message each must get (a substring of its stderr line).
bad_cmds=("/nosuchcmd" "/temp abc" "/undo x" "/load $work/missing.json" '/stop add "open'
          "/topp 1.5" "/t" "/bars 99" "/pick 2" "/gamma 0" "/load $work/bad.json" "/max -3")
bad_msgs=("Unknown command '/nosuchcmd'" '/temp: "abc" is not a number'
          '/undo: "x" is not a positive integer' "missing.json: cannot open: No such file or directory"
          "/stop: unterminated quote" "/topp: 1.5 is outside [0, 1]"
          "ambiguous command: /t, could be:" '/bars: "99" is not an integer in [1, 32]'
          "/pick: step mode needs the terminal UI" '/gamma: "0" is not an integer in [1, 64]'
          "bad.json: version: this build reads version 1" '/max: "-3" is not')
prompts=("In the beginning" "And God said" "The LORD is my shepherd" "Blessed are the meek"
         "And it came to pass" "Thus saith the LORD" "For God so loved the world"
         "Let there be light" "Behold" "And Moses went up")
printf '{"format":"tokentop-session","version":2,"text":"x"}' > "$work/bad.json"
printf 'And the earth was without form, and void.\n' > "$work/plain.txt"
declare -A bad_count=()
RANDOM=$seed
{
    echo "/seed $seed"
    echo "/stop add \\n\\n"
    for ((i = 0; i < turns; i++)); do
        r=$((RANDOM % 100))
        if   [ $r -lt 30 ]; then echo "${prompts[RANDOM % ${#prompts[@]}]}"
        elif [ $r -lt 37 ]; then echo ""
        elif [ $r -lt 45 ]; then echo "/undo"
        elif [ $r -lt 51 ]; then echo "/regen"
        elif [ $r -lt 54 ]; then echo "/reset"
        elif [ $r -lt 58 ]; then echo "/save $work/s.json"; echo "/load $work/s.json"
        elif [ $r -lt 60 ]; then echo "/load $work/plain.txt"
        elif [ $r -lt 63 ]; then echo "/spec on"
        elif [ $r -lt 66 ]; then echo "/spec off"
        elif [ $r -lt 70 ]; then echo "/max $((RANDOM % 4 == 0 ? 100 : 4 + RANDOM % 12))"
        elif [ $r -lt 73 ]; then echo "/temp 0.$((RANDOM % 10))"
        elif [ $r -lt 75 ]; then echo "/topk $((RANDOM % 60))"
        elif [ $r -lt 76 ]; then echo "/greedy"
        elif [ $r -lt 77 ]; then echo "/sample"
        elif [ $r -lt 78 ]; then echo "/gamma $((1 + RANDOM % 6))"
        elif [ $r -lt 79 ]; then echo "/ids 3"
        elif [ $r -lt 80 ]; then echo "/show"
        elif [ $r -lt 81 ]; then echo "//slash text"
        else
            k=$((RANDOM % ${#bad_cmds[@]}))
            echo "${bad_cmds[k]}"
            bad_count[$k]=$(( ${bad_count[$k]:-0} + 1 ))
        fi
    done
    # Still usable: a fresh conversation with greedy settings.
    printf '/reset\n/spec off\n/max 12\n/greedy\n/stop clear\nIn the beginning God created\n'
    echo "/soak-finished"
} > "$work/script"
lines=$(wc -l < "$work/script")

# ---- Run it, keeping stdin open until the end marker is answered, sampling /proc meanwhile.
mkfifo "$work/in"
"$bin" --backend cpu --model "$model" --draft "$draft" --spec off --ctx "$ctx" -n 8 \
    < "$work/in" > "$work/out" 2> "$work/err" &
pid=$!
exec 3> "$work/in"
cat "$work/script" >&3 &
feeder=$!
start=$(date +%s.%N)
: > "$work/samples"
while kill -0 "$pid" 2>/dev/null; do
    rss=$(awk '/^VmRSS/ {print $2}' "/proc/$pid/status" 2>/dev/null)
    fds=$(ls "/proc/$pid/fd" 2>/dev/null | wc -l)
    [ -n "$rss" ] && echo "$(date +%s.%N) $rss $fds" >> "$work/samples"
    grep -q "Unknown command '/soak-finished'" "$work/err" && break
    sleep 0.25
done
hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$pid/status" 2>/dev/null)
fds_end=$(ls "/proc/$pid/fd" 2>/dev/null | wc -l)
wait "$feeder" 2>/dev/null
exec 3>&-
wait "$pid"
status=$?
pid=
elapsed=$(echo "$(date +%s.%N) - $start" | bc)
[ -n "$keep" ] && mkdir -p "$keep" && cp "$work"/{script,out,err,samples} "$keep"/

# ---- Checks
[ $status -eq 0 ] || fail "exit status $status (stderr tail: $(tail -n 3 "$work/err"))"
grep -q "Unknown command '/soak-finished'" "$work/err" || fail "the session did not reach the end"
n=$(wc -l < "$work/samples")
if [ "$n" -ge 8 ]; then
    q=$((n / 4))
    first=$(head -n "$q" "$work/samples" | awk 'BEGIN{m=0} $2>m{m=$2} END{print m}')
    last=$(tail -n "$q" "$work/samples" | awk 'BEGIN{m=0} $2>m{m=$2} END{print m}')
    peak=$(awk 'BEGIN{m=0} $2>m{m=$2} END{print m}' "$work/samples")
    fds_start=$(sed -n 2p "$work/samples" | awk '{print $3}')
    fds_max=$(awk 'BEGIN{m=0} $3>m{m=$3} END{print m}' "$work/samples")
    echo "soak: $turns turns ($lines lines) in ${elapsed%.*} s; RSS peak first quarter ${first} KB," \
         "last quarter ${last} KB, overall ${peak} KB (VmHWM ${hwm:-?} KB); fds after start" \
         "$fds_start, at most $fds_max, at the end $fds_end ($n samples)"
    if [ $asan -eq 1 ]; then
        echo "soak: AddressSanitizer build: RSS not judged (quarantine); leaks are, at exit"
    elif [ $((last - first)) -gt "$slack" ]; then
        fail "memory grew: last quarter's peak ${last} KB vs first quarter's ${first} KB"
    fi
    [ "$fds_end" -le "$fds_start" ] || fail "file descriptors leaked: $fds_start -> $fds_end"
else
    echo "soak: $turns turns in ${elapsed%.*} s (too short for memory figures: $n samples)"
    [ -z "$fds_end" ] || [ "$fds_end" -le 5 ] || fail "file descriptors at the end: $fds_end"
fi
for k in "${!bad_count[@]}"; do
    want=${bad_count[$k]}
    got=$(grep -cF -- "${bad_msgs[k]}" "$work/err")
    [ "$got" -ge "$want" ] || fail "'${bad_cmds[k]}' sent $want times, answered $got times"
done
if grep -qE 'ERROR|Sanitizer|runtime error' "$work/err"; then
    fail "error reports on stderr:"
    grep -E 'ERROR|Sanitizer|runtime error' "$work/err" | head -n 5
fi
# The last reply equals a fresh process's reply to the same greedy prompt.
want=$(printf '/greedy\nIn the beginning God created\n' |
       "$bin" --backend cpu --model "$model" --ctx "$ctx" -n 12 2>/dev/null)
got=$(tail -n 1 "$work/out")
[ -n "$want" ] && [ "$got" = "$want" ] ||
    fail "the final reply '$got' differs from a fresh process's '$want'"
total_bad=0
for k in "${!bad_count[@]}"; do total_bad=$((total_bad + bad_count[$k])); done
echo "soak: $total_bad bad commands, each answered; $(wc -l < "$work/out") reply lines"
if [ $fails -gt 0 ]; then
    echo "soak: FAILED ($fails)"
    exit 1
fi
echo "soak: ok"
