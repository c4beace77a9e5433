// The page: a drawing pad, its 8×8 downsampling, live class probabilities and head-only
// teaching, all through the wasm build of burnc's generated modules (../src). Predictions run
// on WebGPU where the browser offers an adapter (the `webgpu` build), else on the CPU in wasm
// (the SIMD128 build where the browser has SIMD128, else the scalar one); teaching always runs
// on the CPU. `?wasm=webgpu|simd|scalar` forces a build. `window.webDigits` is the state the
// browser test reads.

const params = new URLSearchParams(location.search);

// A module whose one function returns a v128 constant: valid exactly where SIMD128 is.
const SIMD_PROBE = new Uint8Array([
  0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version
  0x01, 0x05, 0x01, 0x60, 0x00, 0x01, 0x7b, // types: () -> v128
  0x03, 0x02, 0x01, 0x00, // one function of type 0
  0x0a, 0x16, 0x01, 0x14, 0x00, 0xfd, 0x0c, ...new Array(16).fill(0), 0x0b, // v128.const 0; end
]);

async function chooseVariant() {
  const forced = params.get("wasm");
  if (["webgpu", "simd", "scalar"].includes(forced)) return forced;
  if (navigator.gpu) {
    try {
      const a = await navigator.gpu.requestAdapter();
      if (a) {
        // What WebGPU tells a page about the device (often only vendor and architecture).
        state.adapterInfo = [a.info.vendor, a.info.architecture, a.info.description].filter((x) => x).join(" ");
        return "webgpu";
      }
    } catch (e) {
      // No adapter: the CPU path.
    }
  }
  return WebAssembly.validate(SIMD_PROBE) ? "simd" : "scalar";
}

const $ = (id) => document.getElementById(id);
const pad = $("pad");
const padCtx = pad.getContext("2d");
const gridCanvas = $("grid");
const state = {
  ready: false,
  backend: null,
  variant: null,
  grid: new Array(64).fill(0),
  probs: null,
  predicted: null,
  label: 0,
  examples: 0,
  losses: [],
  error: null,
  firstPredictionMs: null,
  predictMs: [],
  teachMs: [],
};
window.webDigits = { state };

function showError(e) {
  state.error = String(e && e.message ? e.message : e);
  $("error").textContent = state.error;
}

// ---- drawing ---------------------------------------------------------------------------
// The strokes as drawn (pad pixels), kept for the downsampling.
let strokes = [];

function clearPad() {
  strokes = [];
  padCtx.fillStyle = "#fff";
  padCtx.fillRect(0, 0, pad.width, pad.height);
}

function setupPad(onChange) {
  clearPad();
  let last = null;
  const at = (e) => {
    const r = pad.getBoundingClientRect();
    return [(e.clientX - r.left) * (pad.width / r.width), (e.clientY - r.top) * (pad.height / r.height)];
  };
  const line = (a, b) => {
    padCtx.lineWidth = 18;
    padCtx.lineCap = "round";
    padCtx.strokeStyle = "#000";
    padCtx.beginPath();
    padCtx.moveTo(a[0], a[1]);
    padCtx.lineTo(b[0], b[1]);
    padCtx.stroke();
  };
  pad.addEventListener("pointerdown", (e) => {
    pad.setPointerCapture(e.pointerId);
    last = at(e);
    strokes.push([last]);
    line(last, last);
    onChange();
  });
  pad.addEventListener("pointermove", (e) => {
    if (!last) return;
    const p = at(e);
    strokes.at(-1).push(p);
    line(last, p);
    last = p;
    onChange();
  });
  const up = () => {
    if (last) onChange();
    last = null;
  };
  pad.addEventListener("pointerup", up);
  pad.addEventListener("pointercancel", up);
}

// The scikit-learn (UCI) digits were made from 32×32 bitmaps of size-normalised handwriting,
// each 4×4 block counted: 8×8 values of 0–16. Same here: the strokes' bounding box scaled to
// fit 32×32 (aspect kept, centred), drawn with a pen as thick as in those bitmaps (about a fifth
// of the height: their digits are about a third ink), thresholded at half ink, counted per
// 4×4 block.
const PEN = 6;

function downsample() {
  const grid = new Array(64).fill(0);
  const points = strokes.flat();
  if (!points.length) return grid;
  const xs = points.map((p) => p[0]), ys = points.map((p) => p[1]);
  const x0 = Math.min(...xs), y0 = Math.min(...ys);
  const bw = Math.max(...xs) - x0, bh = Math.max(...ys) - y0;
  const inner = 32 - PEN;
  const s = inner / Math.max(bw, bh, 1);
  const ox = (32 - bw * s) / 2, oy = (32 - bh * s) / 2;
  const small = document.createElement("canvas");
  small.width = small.height = 32;
  const sc = small.getContext("2d", { willReadFrequently: true });
  sc.fillStyle = "#fff";
  sc.fillRect(0, 0, 32, 32);
  sc.strokeStyle = sc.fillStyle = "#000";
  sc.lineWidth = PEN;
  sc.lineCap = sc.lineJoin = "round";
  for (const stroke of strokes) {
    sc.beginPath();
    stroke.forEach(([x, y], i) => (i ? sc.lineTo : sc.moveTo).call(sc, ox + (x - x0) * s, oy + (y - y0) * s));
    if (stroke.length === 1) sc.lineTo(ox + (stroke[0][0] - x0) * s + 0.01, oy + (stroke[0][1] - y0) * s);
    sc.stroke();
  }
  const bits = sc.getImageData(0, 0, 32, 32).data;
  for (let y = 0; y < 32; y++) {
    for (let x = 0; x < 32; x++) {
      if (bits[(y * 32 + x) * 4] < 128) grid[(y >> 2) * 8 + (x >> 2)] += 1;
    }
  }
  return grid;
}

function drawGrid(grid) {
  const c = gridCanvas.getContext("2d");
  const cell = gridCanvas.width / 8;
  for (let i = 0; i < 64; i++) {
    const v = 255 - Math.round((grid[i] / 16) * 255);
    c.fillStyle = `rgb(${v},${v},${v})`;
    c.fillRect((i % 8) * cell, Math.floor(i / 8) * cell, cell, cell);
  }
}

// ---- probabilities ---------------------------------------------------------------------
function setupBars() {
  const bars = $("bars");
  for (let d = 0; d < 10; d++) {
    const row = document.createElement("div");
    row.className = "bar";
    row.innerHTML = `<span class="digit">${d}</span><span class="track"><span class="fill" style="width:0%"></span></span><span class="pct">–</span>`;
    bars.appendChild(row);
  }
}

function showProbs(probs) {
  const rows = $("bars").children;
  let best = 0;
  for (let d = 0; d < 10; d++) if (probs[d] > probs[best]) best = d;
  for (let d = 0; d < 10; d++) {
    rows[d].classList.toggle("best", d === best);
    rows[d].querySelector(".fill").style.width = `${(probs[d] * 100).toFixed(1)}%`;
    rows[d].querySelector(".pct").textContent = `${(probs[d] * 100).toFixed(1)}%`;
  }
  $("predicted").textContent = String(best);
  return best;
}

const median = (xs) => {
  if (!xs.length) return null;
  const s = [...xs].sort((a, b) => a - b);
  return s[s.length >> 1];
};

// ---- the model ---------------------------------------------------------------------------
let model = null; // the CPU model (wasm): predictions without WebGPU, and all teaching
let gpu = null; // the WebGPU model, when the page runs on one

const infer = (grid) => (gpu ? gpu.predict(new Float32Array(grid)) : model.predict(new Float32Array(grid)));

async function runPrediction() {
  const grid = downsample();
  drawGrid(grid);
  const t = performance.now();
  const probs = await infer(grid);
  const ms = performance.now() - t;
  state.predictMs.push(ms);
  if (state.firstPredictionMs === null) state.firstPredictionMs = performance.now();
  state.grid = grid;
  state.probs = Array.from(probs);
  state.predicted = showProbs(probs);
  $("latency").textContent = `last prediction ${ms.toFixed(3)} ms (median ${median(state.predictMs).toFixed(3)} ms over ${state.predictMs.length})`;
}

// Predictions run one after another (a GPU prediction is asynchronous); `settled` resolves
// when the last one asked for has shown.
let chain = Promise.resolve();
function predict() {
  chain = chain.then(runPrediction).catch(showError);
  return chain;
}
window.webDigits.settled = () => chain.then(() => state);

let pending = false;
function schedulePredict() {
  if (pending) return;
  pending = true;
  requestAnimationFrame(() => {
    pending = false;
    predict();
  });
}

function setupTeach() {
  const labels = $("labels");
  for (let d = 0; d < 10; d++) {
    const b = document.createElement("button");
    b.textContent = String(d);
    b.dataset.label = String(d);
    b.addEventListener("click", () => selectLabel(d));
    labels.appendChild(b);
  }
  selectLabel(0);
  $("add").addEventListener("click", () => guarded(addExample));
  $("teach").addEventListener("click", () => guarded(teach));
  $("reset").addEventListener("click", () => guarded(reset));
  $("clear").addEventListener("click", () => {
    clearPad();
    guarded(predict);
  });
}

function guarded(f) {
  try {
    $("error").textContent = "";
    state.error = null;
    const r = f();
    if (r && r.catch) r.catch(showError);
  } catch (e) {
    showError(e);
  }
}

function selectLabel(d) {
  state.label = d;
  for (const b of $("labels").children) b.classList.toggle("on", Number(b.dataset.label) === d);
}

async function addExample() {
  await predict();
  state.examples = model.addExample(new Float32Array(state.grid), state.label);
  $("examples").textContent = `${state.examples} example${state.examples === 1 ? "" : "s"} (a step uses ${state.teachBatch}, cycling through them)`;
}

function teach() {
  const t = performance.now();
  const loss = model.teach();
  if (gpu) gpu.setHead(model);
  state.teachMs.push(performance.now() - t);
  state.losses.push(loss);
  $("loss").textContent = `step ${state.losses.length}: loss ${loss.toFixed(4)} (${state.teachMs.at(-1).toFixed(2)} ms)`;
  predict();
}

function reset() {
  model.reset();
  if (gpu) gpu.setHead(model);
  state.examples = 0;
  state.losses = [];
  $("examples").textContent = "0 examples";
  $("loss").textContent = "";
  predict();
}

// The browser test times these without the drawing around them: the median over `rounds` of
// the mean time of `n` calls (a single CPU call is below the timer's resolution in a page).
window.webDigits.bench = async (what, n, rounds = 7) => {
  await chain;
  const grid = new Float32Array(state.grid);
  const per = [];
  for (let r = 0; r < rounds; r++) {
    const t = performance.now();
    for (let i = 0; i < n; i++) {
      if (what === "teach") model.teach();
      else await infer(grid);
    }
    per.push((performance.now() - t) / n);
  }
  return median(per);
};
window.webDigits.clear = () => {
  clearPad();
  return predict();
};
window.webDigits.selectLabel = selectLabel;

async function main() {
  setupBars();
  setupPad(schedulePredict);
  setupTeach();
  const variant = await chooseVariant();
  const wasm = await import(`./pkg/${variant}/web_digits.js`);
  await wasm.default();
  model = new wasm.WebDigits();
  const cpu = `CPU (wasm ${variant === "scalar" ? "scalar" : "SIMD128"})`;
  state.variant = variant;
  state.backend = cpu;
  if (variant === "webgpu") {
    try {
      gpu = await wasm.GpuDigits.create();
      state.adapter = state.adapterInfo || gpu.adapter();
      state.backend = "WebGPU";
    } catch (e) {
      state.gpuError = String(e && e.message ? e.message : e);
    }
  }
  state.teachBatch = wasm.WebDigits.teachBatch();
  $("backend").textContent = gpu
    ? `Running on: WebGPU (${state.adapter}); teaching on the ${cpu}`
    : `Running on: ${cpu}${state.gpuError ? ` (WebGPU failed: ${state.gpuError})` : ""}`;
  await predict();
  state.ready = true;
}

main().catch(showError);
