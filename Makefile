# tpcomm: the two commands that matter are `make run` and `make test`; both set themselves up.
.PHONY: all build test run bench format format-check clean

BIN := build/bin/tpcomm
# TPCOMM_PRESET=debug selects the sanitizer build (CMakePresets.json).
PRESET := $(if $(TPCOMM_PRESET),$(TPCOMM_PRESET),default)

all: build

build:
	@scripts/setup.sh

test: build
	ctest --preset $(PRESET)

# For now: this machine's facts, then the plans of the shipped example topologies.
run: build
	@echo "== tpcomm topo (this machine)"
	@$(BIN) topo
	@for f in examples/topologies/*.json; do \
	  echo; echo "== tpcomm plan $$f"; $(BIN) plan $$f || exit $$?; \
	done

bench: build
	build/bench/plan_bench

format:
	clang-format -i $$(git ls-files '*.cpp' '*.hpp' '*.c')

format-check:
	clang-format --dry-run --Werror $$(git ls-files '*.cpp' '*.hpp' '*.c')

clean:
	rm -rf build build-debug
