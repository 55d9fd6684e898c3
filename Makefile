# unisched: `make run` and `make test` do all set-up on a fresh Debian 12.
BUILD      ?= build
BUILD_TYPE ?= RelWithDebInfo
CONFIG     ?= config/unisched.yaml
STATE_DIR  ?= /var/lib/unisched
CMAKE_ARGS ?=
JOBS       ?= $(shell nproc)

# ccache hits across clones in different folders (CI clones afresh).
export CCACHE_BASEDIR := $(CURDIR)

.PHONY: all deps configure build run test unit bench asan fuzz fuzz-smoke format format-check clean

all: build

deps:
	@bash scripts/install-deps.sh

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DCMAKE_CXX_COMPILER_LAUNCHER=ccache $(CMAKE_ARGS)

configure: deps $(BUILD)/build.ninja

build: configure
	cmake --build $(BUILD) -j $(JOBS)

run: build
	$(BUILD)/unisched server --config $(CONFIG) --state-dir $(STATE_DIR)

test: build
	bash scripts/validate-openapi.sh --install
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 600

unit: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -L unit

# Unit and integration tests again under AddressSanitizer + UBSan.
asan:
	$(MAKE) build BUILD=build-asan BUILD_TYPE=Debug CMAKE_ARGS=-DUNISCHED_SANITIZE=ON
	cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -j $(JOBS) --timeout 900 -L 'unit|integration'

# libFuzzer targets (tests/fuzz, docs/fuzzing.md), built with clang in their
# own dir and run one after another, each for FUZZ_SECONDS (FUZZ_SECONDS_<name>
# for one target); any crash, leak or sanitizer report fails. fuzz-smoke: the
# same for CI, under 60 s of fuzzing in all.
FUZZ_BUILD         ?= build-fuzz
FUZZ_TARGETS       ?= http job_json config swf philly agent
FUZZ_SECONDS       ?= 300
FUZZ_SMOKE_SECONDS ?= 8

fuzz: deps
	JOBS=$(JOBS) bash tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

fuzz-smoke: deps
	JOBS=$(JOBS) bash tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SMOKE_SECONDS) $(FUZZ_TARGETS)

bench: build
	bash scripts/bench.sh $(BUILD)

format:
	find src include tests bench -name '*.cc' -o -name '*.h' | xargs clang-format -i

format-check:
	find src include tests bench -name '*.cc' -o -name '*.h' | xargs clang-format --dry-run --Werror

clean:
	rm -rf $(BUILD) build-asan
