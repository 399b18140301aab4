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

OPT      ?= -O2
CFLAGS   += -std=gnu11 -g $(OPT) -Wall -Wextra -Wno-unused-parameter -Wshadow -Wvla \
            -D_GNU_SOURCE -pthread -MMD -MP $(SANFLAGS) -I.
LDFLAGS  += -pthread $(SANFLAGS)
LDLIBS   += -lm

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
CORE_SRC := $(wildcard core/*.c)
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
        fuzz-binaries soak
all: tokentop

# ---------------------------------------------------------------------------------------------
# Dependencies: tools/deps.sh installs missing Debian packages, then pkg-config's answers are cached.
ifeq ($(filter clean,$(MAKECMDGOALS)),)
-include $(BUILD)/config.mk
endif

$(BUILD)/config.mk: tools/deps.sh
	@mkdir -p $(@D)
	@tools/deps.sh
	@{ echo "PKG_CFLAGS := $$(pkg-config --cflags libcjson libpcre2-8 ncursesw)"; \
	   echo "PKG_LIBS := $$(pkg-config --libs libcjson libpcre2-8 ncursesw)"; \
	   echo "CORE_CFLAGS := $$(pkg-config --cflags libcjson libpcre2-8)"; \
	   echo "CHECK_CFLAGS := $$(pkg-config --cflags check)"; \
	   echo "CHECK_LIBS := $$(pkg-config --libs check)"; } > $@.tmp && mv $@.tmp $@

deps:
	@tools/deps.sh

# ---------------------------------------------------------------------------------------------
# Build
tokentop: $(BIN)
ifneq ($(SANITIZE),1)
	$(Q)cp $(BIN) $@.tmp && mv -f $@.tmp $@
endif

# core/ is compiled without ncurses or CUDA include flags; `make layering` also checks the includes.
$(BUILD)/core/%_avx512.o: core/%_avx512.c | $(BUILD)/config.mk
	@mkdir -p $(@D)
	@echo "  CC      $<"
	$(Q)$(CC) $(CFLAGS) $(AVX512_FLAGS) $(CORE_CFLAGS) -c $< -o $@

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
	$(Q)$(CC) $(LDFLAGS) -o $@ $< $(LIB) $(PKG_LIBS) $(GPU_LIBS) $(LDLIBS)

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

layering:
	@if grep -n -E '^\s*#\s*include\s*[<"](n?curses|ncursesw/|cuda|cublas|curand)' core/*.[ch] ; then \
	   echo "layering: core/ must not include ncurses or CUDA headers (see ARCHITECTURE.md)"; exit 1; fi
	@if grep -n -E '^\s*#\s*include\s*[<"](\.\./)?(ui|repl|app|gpu)/' core/*.[ch] ; then \
	   echo "layering: core/ must not include ui/, repl/, app/ or gpu/ headers"; exit 1; fi

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

$(BUILD)/fuzz_%: $(BUILD)/tests/fuzz/fuzz_%.o $(BUILD)/tests/fuzz/fuzzutil.o $(BUILD)/tests/testutil.o $(LIB)
	@echo "  LD      $@"
	$(Q)$(CC) -fsanitize=fuzzer,address,undefined -pthread -o $@ $^ $(PKG_LIBS) $(GPU_LIBS) \
	    $(CHECK_LIBS) $(LDLIBS)

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
run: tokentop
	./tokentop --model $(DEFAULT_MODEL) $(if $(DEFAULT_DRAFT),--draft $(DEFAULT_DRAFT) --spec off)

install: tokentop
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 755 tokentop $(DESTDIR)$(PREFIX)/bin/tokentop

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/tokentop

clean:
	rm -rf build tokentop

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
