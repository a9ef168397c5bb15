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
