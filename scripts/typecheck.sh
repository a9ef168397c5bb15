#!/usr/bin/env bash
# mypy --strict over the whole swarmlog package. The package maps the repository's top-level directories (schemas/,
# actors/, ...) to subpackages (pyproject's package-dir), which mypy cannot follow through the editable install:
# check a tree of links that has the installed layout.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
tree=.cache/typecheck
rm -rf "$tree" && mkdir -p "$tree/swarmlog"
for entry in swarmlog/*; do
  case "$entry" in *__pycache__) continue ;; esac
  ln -s "$root/$entry" "$tree/swarmlog/"
done
for package in schemas actors streams coordinator replay; do
  ln -s "$root/$package" "$tree/swarmlog/$package"
done
cd "$tree" && exec "$root/.venv/bin/mypy" --config-file "$root/pyproject.toml" --cache-dir "$root/.cache/mypy" -p swarmlog "$@"
