# The two entry points of the README: `make demo` and `make test`.
BUILD      ?= build
JOBS       ?= $(shell nproc)
CMAKE_ARGS ?=

.PHONY: setup build demo test test-unit test-asan test-tsan test-install clean

setup:
	@bash scripts/setup.sh

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS)

build: setup $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

# The main job: the tiers, then query-driven prefetching from storage (2^27 rows of two uint64
# columns) refereed by DuckDB, with its plot.
demo: build
	$(BUILD)/tierflow topology
	$(BUILD)/tierflow qdp --compare-duckdb --plot $(BUILD)/qdp.png

test: build
	$(MAKE) --no-print-directory test-unit test-asan test-tsan test-install

test-unit:
	cd $(BUILD) && ctest -j $(JOBS) --output-on-failure

# Everything under AddressSanitizer + UndefinedBehaviorSanitizer.
test-asan:
	cmake -S . -B $(BUILD)-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DTIERFLOW_BUILD_TOOLS=OFF \
	  -DTIERFLOW_SANITIZE=address,undefined
	cmake --build $(BUILD)-asan -j $(JOBS)
	cd $(BUILD)-asan && ASAN_OPTIONS=detect_leaks=1 ctest -j $(JOBS) --output-on-failure -LE cli

# The concurrency tests (and the handle tests they rely on) under ThreadSanitizer.
test-tsan:
	cmake -S . -B $(BUILD)-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTIERFLOW_BUILD_TOOLS=OFF \
	  -DTIERFLOW_SANITIZE=thread
	cmake --build $(BUILD)-tsan -j $(JOBS) --target cpu_concurrency_test handle_test dsa_engine_test \
	  data_ops_test dsa_fleet_test cache_test cache_dirty_test cache_dirty_stress_test fault_test hold_table_test \
	  uring_engine_test qdp_test
	cd $(BUILD)-tsan && TSAN_OPTIONS=halt_on_error=1 ctest -j $(JOBS) --output-on-failure \
	  -R '^(Modes/)?(Concurrency|ConcurrencyWaitMode|Handle)\.|^DsaEngine\.(ManyThreads|Destroyed|SharedWq|Dedicated|Drain|CompletionThread)|^Model/Dsa|^Engines/DataOps\.|^XeonMaxFleet\.|^Cache[A-Za-z]*\.|^CpuCache\.|^HoldTables\.|^IoUringEngine\.|^Qdp\.|^Sizes/CpuEngineFaults\.|^DsaModelFaults\.'

# cmake --install into a scratch prefix, then build and run a consumer with find_package.
test-install:
	bash tests/consumer/run.sh $(BUILD)

clean:
	rm -rf $(BUILD) $(BUILD)-asan $(BUILD)-tsan
