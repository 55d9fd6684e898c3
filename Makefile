# unisched: `make run` and `make test` do all set-up on a fresh Debian 12.
BUILD      ?= build
BUILD_TYPE ?= RelWithDebInfo
CONFIG     ?= config/unisched.yaml
STATE_DIR  ?= /var/lib/unisched
CMAKE_ARGS ?=
JOBS       ?= $(shell nproc)

# ccache hits across clones in different folders (CI clones afresh): paths
# under the clone are made relative, and the working directory is left out
# of the hash, which ccache otherwise adds for every -g compile (so a second
# clone missed every object: measured, docs/testing.md). The price: a cached
# object's debug info names the build directory of the clone that made it.
export CCACHE_BASEDIR := $(CURDIR)
export CCACHE_NOHASHDIR := 1
# One commit's three builds (plain, sanitizers, fuzzers) leave about 3.7 GB
# of objects (1.5, 2.1 and 0.1 GB); ccache's default 5 GB evicted the
# previous commit's while the next was built, so a fresh clone missed.
export CCACHE_MAXSIZE ?= 20G

.PHONY: all deps deps-run configure build run test unit bench asan fuzz fuzz-smoke format format-check clean

all: build

deps:
	@bash scripts/install-deps.sh

# Only what building and running the daemon needs (no test tools).
deps-run:
	@bash scripts/install-deps.sh --run

CMAKE_CONFIGURE = cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) \
	-DCMAKE_CXX_COMPILER_LAUNCHER=ccache $(CMAKE_ARGS)

# With the tests (UNISCHED_TESTS): configured afresh when the build
# directory has none, or was made by `make run` without them.
configure: deps
	@if [ ! -f $(BUILD)/build.ninja ] || grep -q '^UNISCHED_TESTS:BOOL=OFF' $(BUILD)/CMakeCache.txt; then \
	  $(CMAKE_CONFIGURE) -DUNISCHED_TESTS=ON; fi

build: configure
	cmake --build $(BUILD) -j $(JOBS)

# `make run` installs only what running needs (install-deps.sh --run) and
# builds only the three binaries a daemon runs (the daemon, the jobs'
# supervisor, the sandboxes' init); a build directory it makes has no tests
# (UNISCHED_TESTS=OFF) until `make test` or `make build` adds them.
# PORT=N listens on 127.0.0.1:N instead of the config's server.listen
# (LISTEN_HOST=... for another address).
RUN_TARGETS := unisched unisched-supervisor unisched-sandbox
LISTEN_HOST ?= 127.0.0.1
run: deps-run
	@[ -f $(BUILD)/build.ninja ] || $(CMAKE_CONFIGURE) -DUNISCHED_TESTS=OFF
	cmake --build $(BUILD) -j $(JOBS) --target $(RUN_TARGETS)
	$(BUILD)/unisched server --config $(CONFIG) --state-dir $(STATE_DIR) $(if $(PORT),--listen $(LISTEN_HOST):$(PORT))

# `make image`: the container image of those three binaries on a Debian 12
# base made with debootstrap (podman, runc), then the agent launch check in
# it (scripts/make-image.sh, docs/deploy.md). Not part of `make test`.
.PHONY: image
image: deps-run
	@[ -f $(BUILD)/build.ninja ] || $(CMAKE_CONFIGURE) -DUNISCHED_TESTS=OFF
	cmake --build $(BUILD) -j $(JOBS) --target $(RUN_TARGETS)
	BUILD=$(BUILD) bash scripts/make-image.sh

# ctest's status is make's; the summary after it (scripts/test-summary.sh)
# counts the skipped tests, which ctest's own line counts as passed.
test: build
	bash scripts/validate-openapi.sh --install
	cd $(BUILD) && status=0 && ctest --output-on-failure -j $(JOBS) --timeout 600 \
	  --output-junit ctest-junit.xml || status=$$?; \
	  bash $(CURDIR)/scripts/test-summary.sh ctest-junit.xml; exit $$status

unit: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -L unit

# Unit and integration tests again under AddressSanitizer + UBSan, but for
# the suites labelled heavy (tests/CMakeLists.txt, docs/testing.md).
asan:
	$(MAKE) build BUILD=build-asan BUILD_TYPE=Debug CMAKE_ARGS=-DUNISCHED_SANITIZE=ON
	cd build-asan && status=0 && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -j $(JOBS) --timeout 900 -L 'unit|integration' -LE heavy \
	  --output-junit ctest-junit.xml || status=$$?; \
	  bash $(CURDIR)/scripts/test-summary.sh ctest-junit.xml; exit $$status

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
