# tools/train/train.mk: `make models` (the embedded KJV models, from scratch) and `make gpt2`.
# Included by the top-level Makefile. Python runs here only; nothing else in the build needs it.
#
#   make models               corpus -> tokenizer -> train target and draft -> verify -> models/kjv-*
#   make models-verify        re-run the checks against ./tokentop (logits, perplexity, acceptance)
#   make gpt2 MODEL=gpt2-xl   download an official checkpoint into models/<MODEL>/ (needs internet)

TRAIN_PY    ?= /usr/bin/python3
TRAIN_WORK  ?= tools/train/work
TRAIN_VOCAB ?= 4096
# Settings of the committed models (models/README.md lists them with the results).
TARGET_ARGS ?= --n-layer 6 --n-head 4 --n-embd 256 --block-size 256 --batch-size 8 \
               --lr 3e-3 --min-lr 3e-4 --warmup-iters 100 --max-iters 2400 --eval-interval 200 \
               --dropout 0.0 --seed 1337
DRAFT_ARGS  ?= --n-layer 2 --n-head 2 --n-embd 96 --block-size 256 --batch-size 8 \
               --lr 3e-3 --min-lr 3e-4 --warmup-iters 100 --max-iters 2400 --eval-interval 200 \
               --dropout 0.0 --seed 1337 --dtype F32

.PHONY: models models-deps models-verify gpt2

models-deps:
	@tools/deps.sh --train

$(TRAIN_WORK)/corpus/books.json: tools/train/corpus.py | models-deps
	$(TRAIN_PY) tools/train/corpus.py $(TRAIN_WORK)/corpus

$(TRAIN_WORK)/tokenizer/vocab.json: $(TRAIN_WORK)/corpus/books.json tools/train/bpe.py
	$(TRAIN_PY) tools/train/bpe.py train $(TRAIN_WORK)/corpus $(TRAIN_WORK)/tokenizer $(TRAIN_VOCAB)

# Each model trains in the work tree and is copied into models/ only when its run finished.
$(TRAIN_WORK)/kjv-target/model.safetensors: $(TRAIN_WORK)/tokenizer/vocab.json tools/train/train.py tools/train/gpt2.py
	{ nice -n 10 $(TRAIN_PY) tools/train/train.py --corpus $(TRAIN_WORK)/corpus --tokenizer $(TRAIN_WORK)/tokenizer \
	    --out $(TRAIN_WORK)/kjv-target $(TARGET_ARGS); echo $$? > $(TRAIN_WORK)/kjv-target.status; } 2>&1 | tee $(TRAIN_WORK)/kjv-target.log
	@test "$$(cat $(TRAIN_WORK)/kjv-target.status)" = 0

$(TRAIN_WORK)/kjv-draft/model.safetensors: $(TRAIN_WORK)/tokenizer/vocab.json tools/train/train.py tools/train/gpt2.py
	{ nice -n 10 $(TRAIN_PY) tools/train/train.py --corpus $(TRAIN_WORK)/corpus --tokenizer $(TRAIN_WORK)/tokenizer \
	    --out $(TRAIN_WORK)/kjv-draft $(DRAFT_ARGS); echo $$? > $(TRAIN_WORK)/kjv-draft.status; } 2>&1 | tee $(TRAIN_WORK)/kjv-draft.log
	@test "$$(cat $(TRAIN_WORK)/kjv-draft.status)" = 0

models: $(TRAIN_WORK)/kjv-target/model.safetensors $(TRAIN_WORK)/kjv-draft/model.safetensors
	@for m in kjv-target kjv-draft; do \
	    mkdir -p models/$$m && cp $(TRAIN_WORK)/$$m/* models/$$m/ && \
	    cp $(TRAIN_WORK)/$$m.log models/$$m/train.log && echo "models: wrote models/$$m"; done
	$(MAKE) --no-print-directory models-verify

# Needs ./tokentop (built here) for the C side of the comparison; writes $(TRAIN_WORK)/verify.json,
# $(TRAIN_WORK)/verify/samples.md and the reference values models/kjv-excerpt.txt, models/kjv-check.tsv.
models-verify: tokentop
	$(TRAIN_PY) tools/train/verify.py --corpus $(TRAIN_WORK)/corpus --target models/kjv-target \
	    --draft models/kjv-draft --tokentop ./tokentop --work $(TRAIN_WORK) --samples --write-check models

# ---------------------------------------------------------------------------------------------
# Official GPT-2 checkpoints (curl, verified; tools/download_gpt2.sh documents the checks).
MODEL     ?= gpt2
GPT2_DEST ?= models/$(MODEL)
gpt2:
	@$(if $(HF_ENDPOINT),HF_ENDPOINT='$(HF_ENDPOINT)' )$(if $(HF_REVISION),HF_REVISION='$(HF_REVISION)' )tools/download_gpt2.sh $(MODEL) $(GPT2_DEST)
