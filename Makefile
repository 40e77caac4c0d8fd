# Top-level entry points.  `make run` and `make test` work on a fresh Debian
# machine: they install what is missing (as root; otherwise they name it),
# configure, build, then run the main job or every test.
BUILD   ?= build
JOBS    ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps configure build run test install clean bench fuzz

all: build

deps:
	@scripts/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

# The main job: what this machine has, then a loopback perf sweep of its fastest path.
run: build
	$(BUILD)/gpuwire info
	$(BUILD)/gpuwire perf --loopback --op put --size 8:64M --duration 0.5

test: build
	cd $(BUILD) && ctest --output-on-failure -j 2 --timeout 600

install: build
	cmake --install $(BUILD) $(if $(PREFIX),--prefix $(PREFIX),)

bench: build
	bench/tcp_loopback.sh

clean:
	rm -rf $(BUILD)
