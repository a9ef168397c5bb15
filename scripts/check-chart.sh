#!/usr/bin/env bash
# The Helm chart's check (`make chart`; tests/test_chart.py runs it in `make test`), offline but for the Go module
# proxy: builds helm and the manifest validator (deploy/helm/validate) into .cache/go-bin, lints the chart, renders
# it with its default values and with each deploy/helm/swarmlog/ci/*-values.yaml into .cache/chart/, and validates
# every rendered manifest against the Kubernetes API types. helm is built once per version (a few minutes the first
# time); Go's module and build caches, outside the checkout, make a fresh clone's build seconds after that.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
HELM_VERSION=v4.3.2
chart=deploy/helm/swarmlog
bin=$root/.cache/go-bin
out=$root/.cache/chart
start=$SECONDS

step() { echo "chart: $* ($((SECONDS - start)) s)"; }

command -v go >/dev/null || PATH=/usr/local/go/bin:$PATH
if ! command -v go >/dev/null; then
  echo "error: no Go toolchain (go on PATH or /usr/local/go/bin); install Go 1.26 to build helm and the validator" >&2
  exit 3
fi

helm=$bin/helm-$HELM_VERSION/helm
if [[ ! -x $helm ]]; then
  step "building helm $HELM_VERSION from the Go module proxy into .cache/go-bin (minutes the first time on this machine)"
  GOBIN=$bin/helm-$HELM_VERSION go install "helm.sh/helm/v4/cmd/helm@$HELM_VERSION"
fi
step "building the validator (deploy/helm/validate)"
(cd deploy/helm/validate && GOFLAGS=-mod=readonly go build -o "$bin/swarmlog-chart-validate" .)
validate=$bin/swarmlog-chart-validate

rm -rf "$out" && mkdir -p "$out"
values=("")
for file in "$chart"/ci/*-values.yaml; do
  values+=("$file")
done
for file in "${values[@]}"; do
  name=default
  args=()
  if [[ -n $file ]]; then
    name=$(basename "$file" -values.yaml)
    args=(--values "$file")
  fi
  step "$name: helm lint, helm template, validate"
  "$helm" lint --strict --quiet "$chart" "${args[@]}"
  "$helm" template swarmlog "$chart" --namespace swarmlog "${args[@]}" >"$out/$name.yaml"
  "$validate" "$out/$name.yaml"
done
step "ok: ${#values[@]} renderings linted and valid; manifests in .cache/chart/"
