#!/usr/bin/env python3
"""The browser test of examples/web-digits (run by ../browser-test.sh, after ../build.sh).

Serves the page on 127.0.0.1, starts headless Chromium through chromedriver (the W3C WebDriver
protocol: JSON over HTTP on a loopback port, spoken here with urllib), draws digits on the
canvas with real pointer input, reads what the page predicted from the 8×8 grid it made, adds
the drawings as labelled examples, presses Teach, and replays the same grids and batch through
the native build of the same crate (`native-digits`). Three runs: the build the page picks
without WebGPU (SIMD128 where the browser has it), the scalar build forced, and, in a browser
started with WebGPU on (SwiftShader's adapter in headless Chromium), the WebGPU build. Saves a
screenshot per run, prints timings, and as its last line (the worst of all runs):

    browser_prediction=<digits> native_prediction=<digits> max_prob_diff=<x> teach_loss_diff=<x>

Exits 1 when a difference is over its tolerance: 1e-5 where both sides run f32 on the CPU,
1e-4 for probabilities from WebGPU (other kernels, other summation order).
"""
import argparse
import base64
import gzip
import json
import math
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
PAGE = os.path.dirname(HERE)
TOL_CPU = 1e-5
TOL_GPU = 1e-4
ELEMENT = "element-6066-11e4-a52e-4f735466cecf"  # the W3C key of an element reference

# Strokes of each digit, in fractions of the pad (x right, y down); one list per stroke.
STROKES = {
    "0": [[(0.5 + 0.2 * math.sin(t / 24 * 2 * math.pi), 0.5 - 0.32 * math.cos(t / 24 * 2 * math.pi)) for t in range(25)]],
    "1": [[(0.53, 0.14), (0.47, 0.86)]],
    "4": [[(0.58, 0.14), (0.26, 0.6), (0.76, 0.6)], [(0.6, 0.36), (0.6, 0.87)]],
    "7": [[(0.27, 0.17), (0.73, 0.17), (0.44, 0.86)]],
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class WebDriver:
    """Just the WebDriver commands this test needs."""

    def __init__(self, chromedriver, chromium, extra_args):
        self.port = free_port()
        self.proc = subprocess.Popen([chromedriver, f"--port={self.port}", "--allowed-ips=127.0.0.1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.base = f"http://127.0.0.1:{self.port}"
        for _ in range(100):
            try:
                if self.request("GET", "/status")["value"].get("ready"):
                    break
            except (urllib.error.URLError, ConnectionError):
                pass
            time.sleep(0.1)
        else:
            raise RuntimeError("chromedriver did not start")
        args = ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,900", "--hide-scrollbars", *extra_args]
        caps = {"capabilities": {"alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": {"binary": chromium, "args": args}}}}
        self.session = self.request("POST", "/session", caps)["value"]["sessionId"]

    def request(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            raise RuntimeError(f"WebDriver {method} {path}: {e.read().decode(errors='replace')[:2000]}") from None

    def cmd(self, method, path, body=None):
        return self.request(method, f"/session/{self.session}{path}", body)["value"]

    def js(self, script, *args):
        """Runs `script` as a function body; a returned promise is awaited."""
        return self.cmd("POST", "/execute/sync", {"script": script, "args": list(args)})

    def element(self, css):
        return self.cmd("POST", "/element", {"using": "css selector", "value": css})

    def click(self, css):
        self.cmd("POST", f"/element/{self.element(css)[ELEMENT]}/click", {})

    def draw(self, css, strokes):
        """Pointer strokes over the element; points are fractions of its size."""
        el = self.element(css)
        rect = self.cmd("GET", f"/element/{el[ELEMENT]}/rect")
        w, h = rect["width"], rect["height"]
        moves = []
        for stroke in strokes:
            for i, (fx, fy) in enumerate(stroke):
                # Offsets from the element's centre, as WebDriver takes them.
                moves.append({"type": "pointerMove", "origin": el, "x": round((fx - 0.5) * w), "y": round((fy - 0.5) * h), "duration": 20})
                if i == 0:
                    moves.append({"type": "pointerDown", "button": 0})
            moves.append({"type": "pointerUp", "button": 0})
        self.cmd("POST", "/actions", {"actions": [{"type": "pointer", "id": "mouse", "parameters": {"pointerType": "mouse"}, "actions": moves}]})
        self.cmd("DELETE", "/actions")

    def screenshot(self, path):
        with open(path, "wb") as f:
            f.write(base64.b64decode(self.cmd("GET", "/screenshot")))

    def close(self):
        try:
            self.cmd("DELETE", "")
        except Exception:
            pass
        self.proc.terminate()
        self.proc.wait(timeout=10)


# Resolves once the page has shown the prediction its last input scheduled (a frame later).
SETTLED = """
return new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r))).then(() => window.webDigits.settled());
"""


def wait_ready(wd, timeout=60):
    end = time.time() + timeout
    while time.time() < end:
        st = wd.js("return window.webDigits && window.webDigits.state")
        if st and st.get("error"):
            raise RuntimeError(f"the page reports: {st['error']}")
        if st and st.get("ready"):
            return st
        time.sleep(0.1)
    raise RuntimeError("the page did not get ready")


def browser_run(wd, url, digits, screenshot):
    """Draws `digits`, teaches them, returns what the page showed and timings."""
    wd.cmd("POST", "/url", {"url": url})
    st = wait_ready(wd)
    errors = check_errors(wd)
    run = {"errors_checked": errors, "backend": st["backend"], "adapter": st.get("adapter"), "gpu_error": st.get("gpuError"), "first_prediction_ms": st["firstPredictionMs"], "drawn": []}
    for d in digits:
        wd.js("return window.webDigits.clear()")
        wd.draw("#pad", STROKES[d])
        st = wd.js(SETTLED)
        if st.get("error"):
            raise RuntimeError(f"the page reports: {st['error']}")
        run["drawn"].append({"digit": d, "grid": st["grid"], "probs": st["probs"], "predicted": st["predicted"]})
        if os.environ.get("WEB_DIGITS_GRIDS"):
            print(f"drew {d}, ink {sum(st['grid'])}, predicted {st['predicted']}:")
            for r in range(8):
                print("   " + " ".join(f"{v:2d}" for v in st["grid"][r * 8 : r * 8 + 8]))
        wd.click(f'#labels button[data-label="{d}"]')
        wd.click("#add")
    wd.click("#teach")
    st = wd.js(SETTLED)
    if st.get("error") or not st["losses"]:
        raise RuntimeError(f"teach failed: {st.get('error')}")
    run["loss"] = st["losses"][-1]
    run["after"] = {"grid": st["grid"], "probs": st["probs"]}
    if screenshot:
        wd.js("window.scrollTo(0, 0)")
        wd.screenshot(screenshot)
    # Timings last: bench("teach") takes more steps.
    # A GPU prediction waits for its read back, milliseconds where the CPU takes microseconds.
    calls = 20 if run["backend"] == "WebGPU" else 1000
    run["predict_ms"] = wd.js(f"return window.webDigits.bench('predict', {calls})")
    run["teach_ms"] = wd.js("return window.webDigits.bench('teach', 100)")
    return run


# Bad calls from JavaScript: each must throw an Error carrying the Rust error's message (never
# a trap from a panic). Runs in the page on a second model of the build the page loaded.
ERRORS = """
const m = await import(`./pkg/${window.webDigits.state.variant}/web_digits.js`);
const d = new m.WebDigits();
const msg = (f) => { try { f(); return "no error"; } catch (e) { return (e instanceof Error ? "" : "not an Error: ") + e.message; } };
const nan = new Float32Array(64); nan[9] = NaN;
return [
  msg(() => d.predict(new Float32Array(3))),
  msg(() => d.predict(nan)),
  msg(() => d.teach()),
  msg(() => d.addExample(new Float32Array(64), 12)),
  msg(() => d.predict(new Float32Array(64).fill(17))),
];
"""
EXPECTED_ERRORS = ["an image has 64 pixels (8×8), got 3", "pixel 9 is NaN", "teaching needs at least one labelled example", "label 12 is not a digit 0–9", "pixel 0 is 17"]


def check_errors(wd):
    got = wd.js("return (async () => {" + ERRORS + "})()")
    bad = [(w, g) for w, g in zip(EXPECTED_ERRORS, got) if not g.startswith(w)]
    if bad or len(got) != len(EXPECTED_ERRORS):
        raise RuntimeError(f"errors across the JS boundary: want messages starting {EXPECTED_ERRORS}, got {got}")
    return len(got)


def native_replay(native, run):
    """The same grids and teach batch through native-digits; returns its probabilities and loss."""
    fmt = lambda xs: " ".join(repr(float(v)) for v in xs)
    lines = [f"predict {fmt(d['grid'])}" for d in run["drawn"]]
    lines.append("teach " + " ".join(f"{d['digit']}:" + ",".join(repr(float(v)) for v in d["grid"]) for d in run["drawn"]))
    lines.append(f"predict {fmt(run['after']['grid'])}")
    out = subprocess.run([native], input="\n".join(lines) + "\n", capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"native-digits failed: {out.stderr}")
    replies = out.stdout.split("\n")
    probs = [[float(v) for v in r.split()[1:]] for r in replies if r.startswith("probs ")]
    loss = [float(r.split()[1]) for r in replies if r.startswith("loss ")]
    return probs[:-1], loss[0], probs[-1]


def compare(run, native):
    """(largest probability difference, loss difference, native predictions, how far the teach
    step moved the last drawing's probabilities natively)."""
    before, loss, after = native
    diffs = [abs(a - b) for d, n in zip(run["drawn"], before) for a, b in zip(d["probs"], n)]
    diffs += [abs(a - b) for a, b in zip(run["after"]["probs"], after)]
    pred = "".join(str(max(range(10), key=lambda c: n[c])) for n in before)
    moved = max(abs(a - b) for a, b in zip(after, before[-1])) if run["after"]["grid"] == run["drawn"][-1]["grid"] else 0.0
    return max(diffs), abs(run["loss"] - loss), pred, moved


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--native", required=True, help="the native-digits binary")
    ap.add_argument("--artifacts", required=True, help="folder for the screenshot")
    ap.add_argument("--digits", default="0147")
    ap.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    ap.add_argument("--chromedriver", default=shutil.which("chromedriver") or "/usr/bin/chromedriver")
    args = ap.parse_args()
    os.makedirs(args.artifacts, exist_ok=True)

    server = subprocess.Popen([sys.executable, os.path.join(PAGE, "serve.py"), "0"], stdout=subprocess.PIPE, text=True)
    base = server.stdout.readline().strip().split()[-1]
    # (browser flags, [(run, query)]): WebGPU needs a flag in headless Chromium.
    sessions = [([], [("auto", ""), ("scalar", "?wasm=scalar")]), (["--enable-unsafe-webgpu"], [("webgpu", "")])]
    worst_prob, worst_loss, summary, ok = 0.0, 0.0, None, True
    try:
        for flags, runs in sessions:
            wd = WebDriver(args.chromedriver, args.chromium, flags)
            try:
                print(f"browser: {wd.js('return navigator.userAgent')} {' '.join(flags)}")
                for label, query in runs:
                    shot = os.path.join(args.artifacts, f"screenshot-{label}.png")
                    run = browser_run(wd, base + "index.html" + query, args.digits, shot)
                    if label == "webgpu" and run["backend"] != "WebGPU":
                        print(f"webgpu: not offered by this browser (the page runs on {run['backend']}; {run['gpu_error'] or 'no adapter'})")
                        continue
                    prob_diff, loss_diff, native_pred, moved = compare(run, native_replay(args.native, run))
                    browser_pred = "".join(str(d["predicted"]) for d in run["drawn"])
                    tol = TOL_GPU if run["backend"] == "WebGPU" else TOL_CPU
                    ok &= browser_pred == native_pred and prob_diff <= tol and loss_diff <= TOL_CPU
                    # The after-teach comparison only shows the page used the taught head if
                    # teaching moved the probabilities well past the tolerance.
                    ok &= moved > 10 * tol
                    adapter = f" adapter={run['adapter']!r}" if run["adapter"] else ""
                    print(
                        f"{label}: backend={run['backend']!r}{adapter} drew={args.digits} browser_prediction={browser_pred} native_prediction={native_pred} "
                        f"max_prob_diff={prob_diff:.3g} (tolerance {tol:g}) teach_loss={run['loss']:.6f} teach_loss_diff={loss_diff:.3g} teach_moved_probs={moved:.3g} "
                        f"js_errors_checked={run['errors_checked']} first_prediction_ms={run['first_prediction_ms']:.1f} predict_ms={run['predict_ms']:.4f} teach_step_ms={run['teach_ms']:.3f} screenshot={shot}"
                    )
                    worst_prob, worst_loss = max(worst_prob, prob_diff), max(worst_loss, loss_diff)
                    if summary is None:
                        summary = (browser_pred, native_pred)
            finally:
                wd.close()
        for v in ("scalar", "simd", "webgpu"):
            path = os.path.join(PAGE, "www/pkg", v, "web_digits_bg.wasm")
            with open(path, "rb") as f:
                raw = f.read()
            print(f"wasm {v}: {len(raw)} bytes, {len(gzip.compress(raw, 9))} gzipped")
    finally:
        server.terminate()
    print(f"browser_prediction={summary[0]} native_prediction={summary[1]} max_prob_diff={worst_prob:.3g} teach_loss_diff={worst_loss:.3g}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
