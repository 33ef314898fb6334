# SPDX-License-Identifier: Apache-2.0
# The two entry points of the README: `make demo` and `make test`.
BUILD      ?= build
JOBS       ?= $(shell nproc)
CMAKE_ARGS ?=

.PHONY: setup configure build demo bench python-package test rma-conformance test-format test-unit test-asan test-tsan test-clang test-arm64 test-install test-python format clean

setup:
	@bash scripts/setup.sh

# Warnings are errors in `make test` (and so in CI), not in a user's `make demo`.
WERROR ?= OFF
test: WERROR = ON

configure: setup
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DTIERFLOW_WERROR=$(WERROR) \
	  -DTIERFLOW_FORTRAN_TESTS=ON $(CMAKE_ARGS)

build: configure
	cmake --build $(BUILD) -j $(JOBS)

# The main job: the tiers, then query-driven prefetching from storage (2^27 rows of two uint64
# columns) refereed by DuckDB, with its plot; then an external sort on data pipes (1 GiB of
# 16-byte records in 256 MiB) against its I/O floor and DuckDB.
demo: build
	$(BUILD)/tierflow topology
	$(BUILD)/tierflow qdp --compare-duckdb --plot $(BUILD)/qdp.png
	$(BUILD)/tierflow sort --generate 1GiB --memory 256MiB --verify --compare-duckdb --plot $(BUILD)/sort.png

# The benchmarks with --json, and from them docs/benchmarks.md and README's results (several
# minutes; scripts/bench_report.py --quick checks the same path in seconds).
# An existing build is brought up to date as it was configured (not reconfigured).
bench:
	@if [ -f $(BUILD)/build.ninja ]; then cmake --build $(BUILD) -j $(JOBS); else $(MAKE) build; fi
	$(MAKE) --no-print-directory python-package
	python3 scripts/bench_report.py $(BUILD)/tierflow --json-dir $(BUILD)/bench \
	  --python .venv/bin/python

test: build
	$(MAKE) --no-print-directory test-format test-unit test-asan test-tsan test-arm64 test-install test-python

# MPICH's RMA test suite under both MPIs with libtierflow_rma preloaded (docs/rma.md): not part
# of `make test`, it fetches Debian's mpich source and runs for tens of minutes.
rma-conformance: build
	bash scripts/rma_conformance.sh $(BUILD)

# Formatting is clang-format's (.clang-format), not the reviewer's: `make format` applies it,
# test-format fails on any file that differs.
SOURCES = $(shell git ls-files '*.cc' '*.h' 2>/dev/null)
format:
	clang-format --style=file -i $(SOURCES)

test-format:
	@clang-format --style=file --dry-run -Werror $(SOURCES) && echo "test-format: $(words $(SOURCES)) files as clang-format has them"


test-unit:
	cd $(BUILD) && ctest -j $(JOBS) --output-on-failure

# Everything under AddressSanitizer + UndefinedBehaviorSanitizer, but the MPI applications
# (programs of their own on the library's interface, run by the plain build), built with Clang
# (Debian's Clang 14): the tree keeps building with a second compiler, and with its sanitizers,
# in one build (GCC builds the plain and the TSan trees). test-clang: a Release Clang build.
test-asan:
	cmake -S . -B $(BUILD)-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DTIERFLOW_BUILD_TOOLS=OFF \
	  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
	  -DTIERFLOW_SANITIZE=address,undefined -DTIERFLOW_WERROR=ON -DTIERFLOW_BUILD_RMA_APPS=OFF
	cmake --build $(BUILD)-asan -j $(JOBS)
	cd $(BUILD)-asan && ASAN_OPTIONS=detect_leaks=1 ctest -j $(JOBS) --output-on-failure -LE cli

# The concurrent code (the test executables labelled "tsan" in tests/CMakeLists.txt) under
# ThreadSanitizer.
test-tsan:
	cmake -S . -B $(BUILD)-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTIERFLOW_BUILD_TOOLS=OFF \
	  -DTIERFLOW_SANITIZE=thread -DTIERFLOW_WERROR=ON
	cmake --build $(BUILD)-tsan -j $(JOBS) --target tsan_tests
	cd $(BUILD)-tsan && TSAN_OPTIONS=halt_on_error=1 ctest -j $(JOBS) --output-on-failure -L tsan

# The library and its unit tests in a Release build with Clang (not part of `make test`, whose
# sanitizer build is Clang's; the MPI applications are the plain build's).
test-clang:
	cmake -S . -B $(BUILD)-clang -G Ninja -DCMAKE_BUILD_TYPE=Release -DTIERFLOW_BUILD_TOOLS=OFF \
	  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DTIERFLOW_WERROR=ON \
	  -DTIERFLOW_RMA_MUTANTS=OFF -DTIERFLOW_BUILD_RMA_APPS=OFF
	cmake --build $(BUILD)-clang -j $(JOBS)
	cd $(BUILD)-clang && ctest -j $(JOBS) --output-on-failure -LE cli

# The architecture-specific code (coherence maintenance, tests/arm64/CMakeLists.txt) cross-built
# for arm64 and run under qemu-user with 32-, 64- and 256-byte cache lines (qemu's max,
# cortex-a76 and a64fx models). qemu runs DC instructions as no-ops: this tests behaviour,
# never timing, and not the fault on PROT_NONE memory (qemu does not raise it).
ARM64_CPUS = max:32 cortex-a76:64 a64fx:256
ARM64_TESTS = coherence_test noncoherent_memory_test
test-arm64:
	cmake -S tests/arm64 -B $(BUILD)-arm64 -G Ninja -DCMAKE_BUILD_TYPE=Release \
	  -DCMAKE_TOOLCHAIN_FILE=$(CURDIR)/cmake/aarch64-linux-gnu.cmake
	cmake --build $(BUILD)-arm64 -j $(JOBS)
	@set -e; for cpu in $(ARM64_CPUS); do for t in $(ARM64_TESTS); do \
	  echo "test-arm64: $$t on qemu -cpu $${cpu%:*} ($${cpu#*:}-byte lines)"; \
	  TIERFLOW_UNDER_QEMU=1 TIERFLOW_EXPECT_LINE_SIZE=$${cpu#*:} qemu-aarch64-static -cpu $${cpu%:*} \
	    -L /usr/aarch64-linux-gnu $(BUILD)-arm64/$$t --gtest_brief=1; done; done
	@echo "test-arm64: protocols_test on qemu -cpu cortex-a76, 300 schedules per protocol"
	TIERFLOW_SIM_SCHEDULES=300 qemu-aarch64-static -cpu cortex-a76 -L /usr/aarch64-linux-gnu \
	  $(BUILD)-arm64/protocols_test --gtest_brief=1

# cmake --install into a scratch prefix, then build and run a consumer with find_package.
test-install:
	bash tests/consumer/run.sh $(BUILD)

# The wheel of this tree, also installed into the .venv (the Python benchmark runs there).
python-package: setup
	rm -rf $(BUILD)-wheel
	CMAKE_BUILD_PARALLEL_LEVEL=$(JOBS) .venv/bin/pip wheel -q --no-build-isolation --no-deps \
	  --disable-pip-version-check -w $(BUILD)-wheel .
	.venv/bin/pip install -q --disable-pip-version-check --force-reinstall --no-deps \
	  $(BUILD)-wheel/tierflow-*.whl

# The Python package as users get it: the wheel `pip install .` builds (made with the .venv's
# nanobind and scikit-build-core, so that the build directory under build/python stays valid
# between runs), installed into a new venv with nothing else; there its tests (tests/python),
# the examples, and mypy with the package's stubs over the examples.
PYVENV = $(BUILD)-python
test-python: python-package
	rm -rf $(PYVENV) && python3 -m venv $(PYVENV)
	$(PYVENV)/bin/pip install -q --disable-pip-version-check $(BUILD)-wheel/tierflow-*.whl \
	  -r scripts/requirements-python-test.txt
	cd $(PYVENV) && TIERFLOW_CLI=$(abspath $(BUILD))/tierflow bin/python -m pytest -q \
	  -p no:cacheprovider $(CURDIR)/tests/python
	@set -e; for e in examples/python/*.py; do echo "test-python: $$e"; \
	  $(PYVENV)/bin/python $$e >/dev/null; done
	$(PYVENV)/bin/python -m mypy --no-incremental examples/python

clean:
	rm -rf $(BUILD) $(BUILD)-asan $(BUILD)-tsan $(BUILD)-clang $(BUILD)-arm64 $(BUILD)-python \
	  $(BUILD)-wheel build/python
