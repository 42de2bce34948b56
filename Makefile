# tpcomm: the two commands that matter are `make run` and `make test`; both set themselves up.
.PHONY: all build test test-engines run bench format format-check lint tidy clean

BIN := build/bin/tpcomm
# TPCOMM_PRESET=debug selects the sanitizer build of the in-process tiers, debug-full of every
# tier (CMakePresets.json, docs/testing.md).
PRESET := $(if $(TPCOMM_PRESET),$(TPCOMM_PRESET),default)

all: build

build:
	@scripts/setup.sh

test: build
	ctest --preset $(PRESET)

# tpcomm inside vLLM and SGLang (tests/engines, docs/engines.md) and under Hugging Face
# transformers' tensor parallelism (docs/transformers.md): each one's own environment from the
# package index (scripts/setup-engines.sh: .venv-vllm, .venv-sglang and .venv-transformers, about
# 26 GB and 16 minutes the first time, nothing once made), then its tests under its interpreter.
test-engines: build
	scripts/setup-engines.sh
	timeout 1200 .venv-vllm/bin/python -m pytest -q -rs -p no:cacheprovider tests/engines/test_vllm.py
	timeout 1200 .venv-sglang/bin/python -m pytest -q -rs -p no:cacheprovider tests/engines/test_sglang.py
	timeout 900 .venv-transformers/bin/python -m pytest -q -rs -p no:cacheprovider tests/engines/test_transformers.py

# This machine's facts, the plans of the shipped example topologies, then a live group: the
# example all-reduce on 2 ranks, and on 4 ranks over 2 simulated nodes (hier; needs root); then the
# benchmark against Open MPI and Gloo.
run: build
	@echo "== tpcomm topo (this machine)"
	@$(BIN) topo
	@for f in examples/topologies/*.json; do \
	  echo; echo "== tpcomm plan $$f"; $(BIN) plan $$f || exit $$?; \
	done
	@echo; echo "== tpcomm run -n 2 -- build/bin/allreduce"
	@$(BIN) run -n 2 -- build/bin/allreduce
	@echo; echo "== tpcomm run -n 4 --nodes 2 -- build/bin/allreduce (two simulated nodes: hier)"
	@$(BIN) run -n 4 --nodes 2 -- build/bin/allreduce
	@echo; echo "== Python: examples/python/tp_mlp.py, tensor-parallel MLP under tpcomm run -n 4 and torchrun"
	@PYTHONPATH=build/python $(BIN) run -n 4 -- /usr/bin/python3 examples/python/tp_mlp.py
	@PYTHONPATH=build/python torchrun --redirects 2 --tee 2 --nproc_per_node 2 examples/python/tp_mlp.py
	@echo; echo "== tpcomm bench -n 2 --check --compare mpi,gloo (float32, then bfloat16)"
	@$(BIN) bench -n 2 -b 4K -e 16M --check --compare mpi,gloo
	@$(BIN) bench -n 2 -b 4K -e 16M --check --compare mpi,gloo --dtype bfloat16

bench: build
	build/bench/plan_bench
	build/bench/communicator_bench
	build/bench/reduce_bench
	build/bench/copy_bench
	build/bench/bf16_floor_bench

format:
	clang-format -i $$(git ls-files '*.cpp' '*.hpp' '*.c' '*.cu' '*.cuh')

format-check:
	clang-format --dry-run --Werror $$(git ls-files '*.cpp' '*.hpp' '*.c' '*.cu' '*.cuh')

# ruff (ruff.toml) over python/, tests/python/ and bench/: lint, then the format, both as checks. Its own
# environment, .venv-lint, pinned by python/requirements-lint.txt.
lint: .venv-lint/requirements-installed.txt
	.venv-lint/bin/ruff check python tests/python bench
	.venv-lint/bin/ruff format --check python tests/python bench

.venv-lint/requirements-installed.txt: python/requirements-lint.txt
	rm -rf .venv-lint
	/usr/bin/python3 -m venv .venv-lint
	.venv-lint/bin/pip install -q --disable-pip-version-check -r python/requirements-lint.txt
	cp python/requirements-lint.txt $@

# clang-tidy (.clang-tidy) over every C++ source of src/, tools/ and python/src/ (scripts/tidy.sh;
# .ci/run lints the ones changed since the last release tag).
tidy: build
	scripts/tidy.sh --all

clean:
	rm -rf build build-debug build-debug-full
