# tokentop: make | make run | make test | make SANITIZE=1 test | make CUDA=1 | make install
#
# Objects go under build/ (build/asan/ with SANITIZE=1). Library flags come from pkg-config and are
# cached in $(BUILD)/config.mk, which is made (after tools/deps.sh installs what is missing) before
# anything else is built. V=1 shows the commands.

CC      ?= cc
PREFIX  ?= /usr/local
DESTDIR ?=

SANITIZE ?=
ifeq ($(SANITIZE),1)
BUILD   ?= build/asan
SANFLAGS = -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
else ifeq ($(SANITIZE),fuzz)
# The fuzzers' build (clang only; `make fuzz` starts it): the library with libFuzzer's coverage
# instrumentation and ASan + UBSan; the harnesses add libFuzzer's main when they are linked.
BUILD   ?= build/fuzz
SANFLAGS = -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer \
           -fno-sanitize-recover=undefined
else
BUILD   ?= build
SANFLAGS =
endif

# CFLAGS, LDFLAGS and LDLIBS are the user's (make CFLAGS=-O0 replaces the optimisation and
# debug flags only); what the build cannot do without (language, include path, dependency files,
# threads, sanitizers) is in TT_* and always appended after them. TT_CFLAGS and TT_LDFLAGS expand
# when used, so a target-specific SANFLAGS (the fuzz build's SIMD kernels) reaches them.
OPT      ?= -O2
CFLAGS   ?= -g $(OPT)
TT_CFLAGS = -std=gnu11 -Wall -Wextra -Wno-unused-parameter -Wshadow -Wvla -D_GNU_SOURCE -pthread \
             -MMD -MP $(SANFLAGS) -I.
TT_LDFLAGS = -pthread $(SANFLAGS)
TT_LDLIBS  := -lm
override CFLAGS  += $(TT_CFLAGS)
override LDFLAGS += $(TT_LDFLAGS)
override LDLIBS  += $(TT_LDLIBS)

# Files named *_avx512.c / *_avx2.c hold SIMD kernels chosen at run time; only they get these flags,
# so the rest of the binary runs on any x86-64 (and non-x86 builds simply leave them out).
AVX512_FLAGS = -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512bf16 -mavx512fp16 -mfma -mf16c
AVX2_FLAGS   = -mavx2 -mfma -mf16c

ifeq ($(V),1)
Q =
else
Q = @
endif

ARCH := $(shell uname -m)

# ---------------------------------------------------------------------------------------------
# Sources
CORE_SRC := $(wildcard core/*/*.c)
ifneq ($(ARCH),x86_64)
CORE_SRC := $(filter-out %_avx512.c %_avx2.c,$(CORE_SRC))
endif
UI_SRC   := $(wildcard ui/*.c)
REPL_SRC := $(wildcard repl/*.c)
APP_SRC  := $(filter-out app/main.c,$(wildcard app/*.c))
LIB_SRC  := $(CORE_SRC) $(UI_SRC) $(REPL_SRC) $(APP_SRC)
TEST_SRC := $(wildcard tests/check_*.c)
TOOL_SRC := $(wildcard tools/*.c)

LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
TESTS    := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
TOOLS    := $(TOOL_SRC:tools/%.c=$(BUILD)/tools/%)
LIB      := $(BUILD)/libtokentop.a
BIN      := $(BUILD)/tokentop

.DEFAULT_GOAL := all

# The GPU backend adds its objects and rules here (CUDA=1 for nvcc, or the host emulation).
GPU_OBJ :=
-include gpu/gpu.mk
# Training the embedded models (make models) lives with its scripts.
-include tools/train/train.mk

# Keep objects that only feed test and tool binaries.
.SECONDARY:

.PHONY: all run test check-tests e2e tools install uninstall clean deps layering fuzz fuzz-build \
        fuzz-binaries soak docs
all: tokentop

# ---------------------------------------------------------------------------------------------
# Dependencies: tools/deps.sh installs missing Debian packages, then pkg-config's answers are cached.
ifeq ($(filter clean,$(MAKECMDGOALS)),)
-include $(BUILD)/config.mk
endif

$(BUILD)/config.mk: tools/deps.sh
	@mkdir -p $(@D)
	@tools/deps.sh
	@{ echo "PKG_CFLAGS := $$(pkg-config --cflags libcjson libpcre2-8 libutf8proc ncursesw)"; \
	   echo "PKG_LIBS := $$(pkg-config --libs libcjson libpcre2-8 libutf8proc ncursesw)"; \
	   echo "CORE_CFLAGS := $$(pkg-config --cflags libcjson libpcre2-8 libutf8proc)"; \
	   echo "CHECK_CFLAGS := $$(pkg-config --cflags check)"; \
	   echo "CHECK_LIBS := $$(pkg-config --libs check)"; } > $@.tmp && mv $@.tmp $@

deps:
	@tools/deps.sh

# ---------------------------------------------------------------------------------------------
# Build
# ./tokentop (and the mode's GPU plugin beside it, where the loader looks) for make run.
tokentop: $(BIN) $(GPU_PLUGIN) gpu-plugin-stale
ifneq ($(SANITIZE),1)
	$(Q)cp $(BIN) $@.tmp && mv -f $@.tmp $@
	$(Q)rm -f $(GPU_PLUGIN_STALE)
	$(if $(GPU_PLUGIN),$(Q)cp $(GPU_PLUGIN) $(notdir $(GPU_PLUGIN)).tmp && mv -f $(notdir $(GPU_PLUGIN)).tmp $(notdir $(GPU_PLUGIN)))
endif

# core/ is compiled without ncurses or CUDA include flags; `make layering` also checks the includes.
$(BUILD)/core/%_avx512.o: core/%_avx512.c | $(BUILD)/config.mk
	@mkdir -p $(@D)
	@echo "  CC      $<"
	$(Q)$(CC) $(CFLAGS) $(AVX512_FLAGS) $(CORE_CFLAGS) -c $< -o $@

# The VNNI set, the BF16 set and the AMX set, which have VNNI too (kernels.c checks the CPU for them).
$(BUILD)/core/%vnni_avx512.o: AVX512_FLAGS += -mavx512vnni
$(BUILD)/core/%bf16_avx512.o: AVX512_FLAGS += -mavx512vnni
$(BUILD)/core/%amx_avx512.o: AVX512_FLAGS += -mavx512vnni -mamx-tile -mamx-bf16

$(BUILD)/core/%_avx2.o: core/%_avx2.c | $(BUILD)/config.mk
	@mkdir -p $(@D)
	@echo "  CC      $<"
	$(Q)$(CC) $(CFLAGS) $(AVX2_FLAGS) $(CORE_CFLAGS) -c $< -o $@

$(BUILD)/core/%.o: core/%.c | $(BUILD)/config.mk
	@mkdir -p $(@D)
	@echo "  CC      $<"
	$(Q)$(CC) $(CFLAGS) $(CORE_CFLAGS) -c $< -o $@

$(BUILD)/%.o: %.c | $(BUILD)/config.mk
	@mkdir -p $(@D)
	@echo "  CC      $<"
	$(Q)$(CC) $(CFLAGS) $(PKG_CFLAGS) -c $< -o $@

$(BUILD)/tests/%.o: tests/%.c | $(BUILD)/config.mk
	@mkdir -p $(@D)
	@echo "  CC      $<"
	$(Q)$(CC) $(CFLAGS) $(PKG_CFLAGS) $(CHECK_CFLAGS) -DTU_FIXTURES='"$(abspath tests/fixtures)"' -c $< -o $@

$(LIB): $(LIB_OBJ) $(GPU_OBJ)
	@echo "  AR      $@"
	$(Q)rm -f $@ && ar rcs $@ $^

$(BIN): $(BUILD)/app/main.o $(LIB)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) $(GPU_HOST_LDFLAGS) -o $@ $< $(LIB) $(PKG_LIBS) $(GPU_LIBS) $(LDLIBS)

$(BUILD)/tools/%: $(BUILD)/tools/%.o $(LIB)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $< $(LIB) $(PKG_LIBS) $(GPU_LIBS) $(LDLIBS)

tools: $(TOOLS)

# ---------------------------------------------------------------------------------------------
# Tests: every tests/check_<module>.c is its own Check program; tests/e2e/*.sh drive the binary.
# TOKENTOP_GPT2_DIR points at the GPT-2 tokenizer conformance files: the repository's own copy
# (tests/fixtures/gpt2) unless the environment names another.
TOKENTOP_GPT2_DIR ?= $(abspath tests/fixtures/gpt2)
export TOKENTOP_GPT2_DIR

$(BUILD)/tests/check_%: $(BUILD)/tests/check_%.o $(BUILD)/tests/testutil.o $(LIB)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $< $(BUILD)/tests/testutil.o $(LIB) $(PKG_LIBS) $(GPU_LIBS) $(CHECK_LIBS) $(LDLIBS)

test: layering $(TESTS) $(TOOLS) $(BIN) $(GPU_TEST_DEPS) fuzz-build
	@BUILD=$(BUILD) BIN=$(BIN) FUZZ_DIR=$(FUZZ_DIR) tests/run.sh $(TESTS)

# The include rules of ARCHITECTURE.md ("Who may include whom"), and no loop of includes or calls
# between modules (X.c with X.h: tools/layering_core.sh reads the includes, tools/layering_calls.sh
# the objects' symbols, so layering builds them first). GPU_API_HEADERS: the gpu/ headers app/ and
# repl/ may include (the backend's public interface).
GPU_API_HEADERS ?= gpu/gpu_plugin.h gpu/cuda_engine.h
layering: $(LIB_OBJ) $(GPU_OBJ)
	@if grep -n -E '^\s*#\s*include\s*[<"](n?curses|ncursesw/|cuda|cublas|curand)' core/*/*.[ch] ; then \
	   echo "layering: core/ must not include ncurses or CUDA headers (see ARCHITECTURE.md)"; exit 1; fi
	@if grep -n -E '^\s*#\s*include\s*[<"](\.\./)?(ui|repl|app|gpu)/' core/*/*.[ch] ; then \
	   echo "layering: core/ must not include ui/, repl/, app/ or gpu/ headers (see ARCHITECTURE.md)"; \
	   exit 1; fi
	@if grep -n -E '^\s*#\s*include\s*"' ui/*.[ch] | grep -v -E '"(core|ui)/' ; then \
	   echo "layering: ui/ includes only core/ and ui/ headers (see ARCHITECTURE.md)"; exit 1; fi
	@if grep -rn -E '^\s*#\s*include\s*"' gpu | grep -v -E '"(core|gpu)/' ; then \
	   echo "layering: gpu/ includes only core/ and gpu/ headers (see ARCHITECTURE.md)"; exit 1; fi
	@if grep -rn -E '^\s*#\s*include\s*"core/' --include='*.cu' --include='*.cc' --include='*.h' \
	     gpu | grep -v '^gpu/core_api.h:' ; then \
	   echo "layering: gpu/'s C++ sources and headers see core/ only through gpu/core_api.h" \
	        "(see ARCHITECTURE.md)"; exit 1; fi
	@if grep -n -E '^\s*#\s*include\s*"' app/*.[ch] repl/*.[ch] \
	     | grep -v -E '"(core|ui|app|repl)/' | grep -v -F $(GPU_API_HEADERS:%=-e '"%"') ; then \
	   echo "layering: app/ and repl/ include core/, ui/, app/, repl/ headers and from gpu/ only" \
	        "$(GPU_API_HEADERS) (see ARCHITECTURE.md)"; exit 1; fi
	@tools/layering_core.sh
	@tools/layering_calls.sh $(BUILD)
	@test -f ARCHITECTURE.md || { echo "layering: ARCHITECTURE.md is missing"; exit 1; }

# The slash-command reference in docs/repl.md and doc/tokentop.1 is generated from the command table
# (tools/cmdref.c); tests/e2e/docs.sh fails while it differs.
docs: $(BUILD)/tools/cmdref
	@tools/docs_sync.sh $(BUILD)

# ---------------------------------------------------------------------------------------------
# Fuzzing: every tests/fuzz/fuzz_<target>.c is a libFuzzer harness over one parser, built with
# clang under build/fuzz/ (tools/deps.sh --fuzz installs clang when it is missing). `make fuzz`
# runs each target for FUZZ_SECONDS (FUZZ_TARGETS="a b" picks some), keeping what it learns in
# build/fuzz/corpus/; `make test` replays each committed corpus (tests/fuzz/corpus/<target>) and
# fuzzes it a few seconds more (tests/fuzz/run.sh). Without clang, both say they skip.
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_DIR     := build/fuzz
FUZZ_TARGETS ?= $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))

ifeq ($(SANITIZE),fuzz)
# The SIMD kernels parse nothing: they are left uninstrumented (with it they take minutes to compile).
$(BUILD)/core/%_avx512.o $(BUILD)/core/%_avx2.o: SANFLAGS =
# clang ignores the kernels' `#pragma GCC target("no-avx512fp16,no-avx512bf16")`: leave those
# instructions out with the flags instead (the fuzzers must run on CPUs without them too).
$(BUILD)/core/%_avx512.o: AVX512_FLAGS := $(filter-out -mavx512fp16 -mavx512bf16,$(AVX512_FLAGS)) \
                                         -Wno-unknown-pragmas
# ... except in the BF16 set, whose instructions they are (chosen only where the CPU has them).
$(BUILD)/core/%bf16_avx512.o: AVX512_FLAGS += -mavx512bf16

$(BUILD)/fuzz_%: $(BUILD)/tests/fuzz/fuzz_%.o $(BUILD)/tests/fuzz/fuzzutil.o $(BUILD)/tests/testutil.o $(LIB)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -fsanitize=fuzzer -o $@ $^ $(PKG_LIBS) $(GPU_LIBS) $(CHECK_LIBS) $(LDLIBS)

fuzz-binaries: $(FUZZ_TARGETS:%=$(BUILD)/fuzz_%)
else
fuzz-build:
	@tools/deps.sh --fuzz --check 2>/dev/null || tools/deps.sh --fuzz || true
	@if command -v $(FUZZ_CC) >/dev/null 2>&1 && tools/deps.sh --fuzz --check 2>/dev/null; then \
	  $(MAKE) --no-print-directory SANITIZE=fuzz BUILD=$(FUZZ_DIR) CC=$(FUZZ_CC) CUDA=0 OPT=-O1 \
	    fuzz-binaries; \
	else \
	  echo "fuzz: $(FUZZ_CC) (or its libFuzzer runtime) is not installed and could not be" \
	       "installed: the fuzz step is SKIPPED"; \
	fi

fuzz: fuzz-build
	@FUZZ_DIR=$(FUZZ_DIR) tests/fuzz/run.sh --long $(FUZZ_SECONDS) $(FUZZ_TARGETS)
endif

# The long-session soak (tests/soak/soak.sh): 10,000 line-mode turns; SOAK_ARGS for its options.
soak: tokentop
	tests/soak/soak.sh $(SOAK_ARGS)

# ---------------------------------------------------------------------------------------------
# Run, install, clean
# The embedded pair (models/README.md): the target, with its draft loaded for /spec on.
DEFAULT_MODEL ?= models/kjv-target
DEFAULT_DRAFT ?= models/kjv-draft
# make run shows 20 tokens a second (docs/repl.md, "Pacing"; the terminal UI's own default too): at
# engine speed a reply appears in one frame and the histogram cannot be followed. RUN_PACE=0 runs
# at engine speed.
RUN_PACE ?= 20
run: tokentop
	./tokentop --model $(DEFAULT_MODEL) $(if $(DEFAULT_DRAFT),--draft $(DEFAULT_DRAFT) --spec off) \
	    --pace $(RUN_PACE)

# make install [PREFIX=/usr/local] [DESTDIR=staging]: the binary, what it needs beside it and the
# man page. The binary finds the models in its ../share/tokentop and the GPU plugin in its
# ../lib/tokentop, so the tree can move as a whole (PREFIX is not compiled in).
MANDIR         ?= $(PREFIX)/share/man/man1
INSTALL_MODELS := kjv-target kjv-draft
MODEL_FILES    := config.json generation_config.json merges.txt model.safetensors vocab.json
I_BIN   = $(DESTDIR)$(PREFIX)/bin
I_DATA  = $(DESTDIR)$(PREFIX)/share/tokentop
I_LIB   = $(DESTDIR)$(PREFIX)/lib/tokentop
I_MAN   = $(DESTDIR)$(MANDIR)
# Only the real CUDA plugin is installed: the emulated one (CUDA=emu) is for tests and demos.
INSTALL_PLUGIN := $(if $(filter 1,$(CUDA)),$(GPU_PLUGIN))

install: $(BIN) $(INSTALL_PLUGIN)
	install -d $(I_BIN) $(I_MAN) $(addprefix $(I_DATA)/models/,$(INSTALL_MODELS))
	install -m 755 $(BIN) $(I_BIN)/tokentop
	for m in $(INSTALL_MODELS); do \
	    install -m 644 $(foreach f,$(MODEL_FILES),models/$$m/$(f)) $(I_DATA)/models/$$m || exit 1; done
	install -m 644 models/README.md $(I_DATA)/models/README.md
	install -m 644 doc/tokentop.1 $(I_MAN)/tokentop.1
ifneq ($(INSTALL_PLUGIN),)
	install -d $(I_LIB)
	install -m 755 $(INSTALL_PLUGIN) $(I_LIB)/$(notdir $(INSTALL_PLUGIN))
endif

# Removes what any mode's install wrote, and the directories that were tokentop's alone.
uninstall:
	rm -f $(I_BIN)/tokentop $(I_MAN)/tokentop.1 $(addprefix $(I_LIB)/,$(GPU_PLUGIN_FILES)) \
	    $(I_DATA)/models/README.md \
	    $(foreach m,$(INSTALL_MODELS),$(addprefix $(I_DATA)/models/$(m)/,$(MODEL_FILES)))
	rmdir $(addprefix $(I_DATA)/models/,$(INSTALL_MODELS)) $(I_DATA)/models $(I_DATA) $(I_LIB) 2>/dev/null || true

clean:
	rm -rf build tokentop $(GPU_PLUGIN_FILES)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
