# SPDX-License-Identifier: Apache-2.0
# Top-level entry points.  `make run` and `make test` work on a fresh machine:
# scripts/install-deps.sh looks for the commands, headers and libraries the
# step needs (CMake from pip counts), installs what is missing where it can
# (root + apt), names a required one it could not get with how to install it,
# and skips optional ones with a one-line note.  Then configure, build, and
# run the main job or every test (what cannot run here is skipped by ctest,
# with the reason).
BUILD   ?= build
JOBS    ?= $(shell nproc)
CMAKE_FLAGS ?=
# what scripts/install-deps.sh checks for: build (default), test, bench
DEPS_STEP = build

.PHONY: all deps configure build run test quick install clean bench fuzz

all: build

deps:
	@scripts/install-deps.sh $(DEPS_STEP)

# configured once; `cmake --build` re-runs CMake itself when a CMakeLists
# changes, and CMAKE_FLAGS=... forces a new configure
configure: deps
	@if [ ! -f $(BUILD)/CMakeCache.txt ] || [ -n "$(CMAKE_FLAGS)" ]; then \
	  cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS) >/dev/null; fi

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

# The main job: what this machine has, then a loopback perf sweep of its
# fastest path: GPU memory first where there is a GPU, then host memory.
# Only the library and the tool are built (no tests), quietly: the log's end
# is shown when the build fails.
run: deps
	@mkdir -p $(BUILD); log=$(BUILD)/make-run.log; : >$$log; \
	echo "make run: building libgpuwire and the gpuwire tool in $(BUILD) (log: $$log)"; \
	if { { [ -f $(BUILD)/CMakeCache.txt ] && [ -z "$(CMAKE_FLAGS)" ]; } || \
	     cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS) >>$$log 2>&1; } && \
	   cmake --build $(BUILD) -j $(JOBS) --target gpuwire_tool >>$$log 2>&1; then :; else \
	  echo "make run: the build failed; the end of $$log:"; tail -n 40 $$log; exit 1; fi
	@scripts/run-main.sh $(BUILD)

test: DEPS_STEP = test
test: build
	cd $(BUILD) && ctest --output-on-failure -j 2 --timeout 600

# the inner loop: every test that needs no qemu guest, GPU, second build or
# long run (label quick, tests/README.md)
quick: DEPS_STEP = test
quick: build
	cd $(BUILD) && ctest --output-on-failure -j 4 --timeout 600 -L quick

# the library, header, tool, NCCL plugin, CMake and pkg-config files, and the
# Python package with its accelerator (under lib/python3.X/; docs/INSTALL.md)
install: build
	cmake --install $(BUILD) $(if $(PREFIX),--prefix $(PREFIX),)

bench: DEPS_STEP = bench
bench: build
	bench/compare/tcp_loopback.sh

clean:
	rm -rf $(BUILD)
