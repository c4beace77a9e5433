#!/usr/bin/env bash
# Fetches the scikit-learn digits data (1797 8×8 images, shipped inside the scikit-learn wheel)
# into data/digits.csv: one pinned wheel downloaded with pip (no install, any host), the CSV
# taken out of it. Nothing is fetched when the example runs. Idempotent.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="$here/data/digits.csv"
[ -s "$out" ] && exit 0
PY="${PYTHON:-python3}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$PY" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    --python-version 3.11 --platform manylinux2014_x86_64 -d "$tmp" scikit-learn==1.7.2
mkdir -p "$here/data"
"$PY" - "$tmp" "$out" <<'PYEOF'
import glob, gzip, sys, zipfile
wheel = glob.glob(sys.argv[1] + "/scikit_learn-1.7.2-*.whl")[0]
with zipfile.ZipFile(wheel) as z:
    data = gzip.decompress(z.read("sklearn/datasets/data/digits.csv.gz"))
open(sys.argv[2], "wb").write(data)
PYEOF
echo "setup.sh: wrote $out ($(wc -l <"$out") rows)" >&2
