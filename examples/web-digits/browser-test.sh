#!/usr/bin/env bash
# The browser test of the page (CI runs it through tests/web_digits.rs): builds it (./build.sh),
# then test/drive.py draws digits in headless Chromium, teaches them, and compares every
# probability and the teach loss with the native build of the same crate. Installs Debian's
# chromium and chromium-driver when they are missing and this runs as root (CI); otherwise
# says what to install. The screenshot goes to $WEB_DIGITS_ARTIFACTS (default
# <target>/web-digits/artifacts). Last line:
#   browser_prediction=<digits> native_prediction=<digits> max_prob_diff=<x> teach_loss_diff=<x>
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}/web-digits"

if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
    else
        echo "browser-test.sh: needs chromium and chromedriver (Debian: apt-get install chromium chromium-driver)" >&2
        exit 2
    fi
fi
"$here/build.sh"
python3 "$here/test/drive.py" --native "$target/native/release/native-digits" \
    --artifacts "${WEB_DIGITS_ARTIFACTS:-$target/artifacts}"
