#!/usr/bin/env bash
# mkbeams.sh: regenerates tests/golden/beam-*.txt, the float64 beam search results that
# tests/check_beam.c compares core/decode/beam.c with. Run from the repository root after `make tools`:
#   tools/ref/mkbeams.sh
# Each case writes a random model with build/tools/mkmodel (the test regenerates the same bytes
# with modelgen and checks the FNV-1a 64 recorded here) and runs tools/ref/beam_ref.py on it.
source "$(dirname "$0")/common.sh"

# beams NAME SEED PROMPT_IDS -- BEAM_REF_ARGS...   (the model: mkmodel's tiny shapes, --seed SEED)
beams() {
    local name=$1 seed=$2 ids=$3; shift 4
    local dir="$tmp/$name"
    "$MKMODEL" "$dir" --seed "$seed" >/dev/null
    "$PY" tools/ref/beam_ref.py "$dir" --name "$name" --ids "$ids" --out "$OUT/$name.txt" "$@"
    echo "wrote $OUT/$name.txt"
}

beams beam-eos          21 5,17,300,42     -- --beams 3 --max-new 8
beams beam-lp2          22 7,7,100         -- --beams 4 --lp 2 --max-new 10
beams beam-lp-negative  23 1,2,3,4,5       -- --beams 4 --lp -0.5 --max-new 8
beams beam-early-ngram  24 9,250,11        -- --beams 4 --lp 0.5 --early --ngram 2 --max-new 10
beams beam-penalties    25 300,301,302     -- --beams 2 --repeat 1.5 --presence 0.3 --window 6 \
                                              --min-tokens 3 --max-new 8
beams beam-no-eos       26 44              -- --beams 5 --eos -1 --max-new 6 --return 3
beams beam-one          27 60,61           -- --beams 1 --eos -1 --max-new 6
