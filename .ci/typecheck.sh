#!/usr/bin/env bash
# mypy cannot follow setuptools' package-dir mapping (core/ -> bosun.core), so type-check
# a throwaway tree of symlinks that has the installed layout.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
tree="$(mktemp -d)"
trap 'rm -rf "$tree"' EXIT
mkdir -p "$tree/bosun"
cp "$root"/bosun/*.py "$root/bosun/py.typed" "$tree/bosun/"
ln -s "$root/bosun/adapters" "$tree/bosun/adapters"
for layer in core server store; do ln -s "$root/$layer" "$tree/bosun/$layer"; done
cd "$tree"
"${MYPY:-mypy}" --config-file "$root/pyproject.toml" -p bosun
