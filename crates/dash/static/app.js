// The page's entry: connects telemetry to the stores, runs the requestAnimationFrame loop that draws the charts (skipped while frozen), and keeps the toolbar, counters, device and thread panels current. Runs on the page's main thread.
// @ts-check

import { connect, getStatus, getTrace, postBurst } from './api.js';
import { BufferStore, SampleStore } from './series.js';
import { CoresChart, EnergyChart, LoadChart, WakeChart, WorkChart, threadColor } from './charts.js';
import { Controls, el, summarize } from './controls.js';
import { Explain } from './explain.js';
import { History } from './history.js';

/** @typedef {import('./types.js').Frame} Frame */
/** @typedef {import('./types.js').Status} Status */
/** @typedef {import('./types.js').Counts} Counts */
/** @typedef {import('./charts.js').ScrollChart} ScrollChart */

/** @param {string} id */
function byId(id) {
  const e = document.getElementById(id);
  if (!e) throw new Error(`missing #${id}`);
  return e;
}

/** @param {string} id */
function canvas(id) {
  return /** @type {HTMLCanvasElement} */ (byId(id));
}

// 3 s at the smallest buffer (16 frames at 48 kHz: 3000 buffers/s) with room to spare.
const store = new BufferStore(16384);
const power = new SampleStore(1024);

/** @type {Record<string, ScrollChart>} */
const charts = {
  load: new LoadChart(canvas('chart-load'), store),
  work: new WorkChart(canvas('chart-work'), store),
  cores: new CoresChart(canvas('chart-cores'), store),
  energy: new EnergyChart(canvas('chart-energy'), power),
  wake: new WakeChart(canvas('chart-wake'), store),
};
const chartNames = Object.keys(charts);
/** Charts drawn from per-buffer data (energy is sampled separately). */
const BUFFER_CHARTS = ['load', 'work', 'cores', 'wake'];
/** @type {Record<string, boolean>} */
const visible = { load: true, work: true, cores: true, energy: true, wake: true, freq: true };

const state = {
  frozen: false,
  /** performance.now() minus server time, the smallest seen (the least-delayed frame) */
  clockOffset: Infinity,
  /** how far behind now the right edge is drawn: a frame carries buffers up to ~45 ms old */
  delayMs: 80,
  configVersion: -1,
  /** @type {Counts | null} */
  counts: null,
  /** @type {Status | null} */
  status: null,
  framesReceived: 0,
  lostHere: 0,
  /** telemetry messages the page could not read, skipped */
  badFrames: 0,
  /** idle-state entries on all CPUs since the dashboard started, as last pushed */
  /** @type {number | null} */
  idleEntries: null,
  /** @type {number | null} */
  inputPeak: null,
  rafId: 0,
  /** draw-cost statistics for the frame-cost readout and the tests */
  draw: { frames: 0, totalMs: 0, maxMs: 0, longGaps: 0, lastT: 0 },
};

const message = byId('message');
/** @type {ReturnType<typeof setTimeout> | undefined} */
let messageTimer;
/**
 * @param {string} text
 * @param {boolean} bad
 */
function say(text, bad) {
  message.textContent = text;
  message.className = bad ? 'bad' : 'ok';
  message.hidden = false;
  clearTimeout(messageTimer);
  messageTimer = setTimeout(() => (message.hidden = true), bad ? 10000 : 3000);
}

const controls = new Controls(byId('controls'), say, () => void refreshStatus());
const explain = new Explain(/** @type {LoadChart} */ (charts.load), say);
const history = new History(say);

// ---- telemetry ----

/** @param {Frame} f */
function onFrame(f) {
  state.framesReceived++;
  store.push(f);
  if (f.drops?.length) explain.addMarks(f.drops);
  if (f.power) {
    power.push(f.t, f.power.watts);
    const energy = /** @type {EnergyChart} */ (charts.energy);
    if (energy.rescale()) updateAxis('energy');
  }
  if (f.freq_khz) showFreqs(f.freq_khz);
  if (f.idle_entries !== null) {
    state.idleEntries = f.idle_entries;
    if (state.status) showStatus(state.status);
  }
  const offset = performance.now() - f.t;
  if (offset < state.clockOffset) state.clockOffset = offset;
  // Buffers that arrive after their columns were drawn (a late frame on a busy machine) are
  // painted in by repainting just those columns, so the edge can stay close to now.
  if (!state.frozen && f.ts.length > 0) {
    for (const name of BUFFER_CHARTS) if (visible[name] && f.ts[0] < charts[name].edge) charts[name].repaintFrom(f.ts[0]);
  }
  const wake = /** @type {WakeChart} */ (charts.wake);
  if (wake.rescale()) updateAxis('wake');
  state.counts = f.counts;
  if (f.input_peak !== null || f.ts.length > 0) state.inputPeak = f.input_peak;
  if (f.config_version !== state.configVersion) {
    state.configVersion = f.config_version;
    void refreshStatus();
  }
}

connect(
  onFrame,
  (n) => {
    state.lostHere = n.dropped_frames;
  },
  (open) => {
    const conn = byId('conn');
    conn.textContent = open ? 'live' : 'disconnected – retrying';
    conn.className = open ? 'conn live' : 'conn down';
    if (!open) state.clockOffset = Infinity;
  },
  (why) => {
    state.badFrames++;
    say(`Skipped a telemetry message the page could not read (${state.badFrames} so far): ${why}`, true);
  },
);

// ---- drawing ----

function draw() {
  if (state.frozen) {
    state.rafId = 0;
    return;
  }
  const t0 = performance.now();
  if (Number.isFinite(state.clockOffset)) {
    const edge = t0 - state.clockOffset - state.delayMs;
    for (const name of chartNames) if (visible[name]) charts[name].render(edge);
  }
  const d = state.draw;
  const cost = performance.now() - t0;
  d.frames++;
  d.totalMs += cost;
  if (cost > d.maxMs) d.maxMs = cost;
  if (d.lastT && t0 - d.lastT > 50) d.longGaps++;
  d.lastT = t0;
  state.rafId = requestAnimationFrame(draw);
}

function startDrawing() {
  if (!state.rafId) {
    state.draw.lastT = 0;
    state.rafId = requestAnimationFrame(draw);
  }
}

/** @param {string} name */
function updateAxis(name) {
  const axis = document.querySelector(`[data-axis="${name}"]`);
  if (!axis) return;
  axis.replaceChildren(
    ...charts[name].axisLabels().map(([frac, text]) => {
      const label = el('span', '', text);
      label.style.top = `${(Math.min(Math.max(frac, 0.02), 0.98) * 100).toFixed(2)}%`;
      return label;
    }),
  );
}

function resizeAll() {
  for (const name of chartNames) {
    if (!visible[name]) continue;
    charts[name].resize();
    updateAxis(name);
  }
}
new ResizeObserver(resizeAll).observe(byId('charts'));

// ---- toolbar ----

const freezeButton = byId('freeze');
freezeButton.addEventListener('click', () => {
  state.frozen = !state.frozen;
  freezeButton.setAttribute('aria-pressed', String(state.frozen));
  freezeButton.textContent = state.frozen ? 'Frozen – resume' : 'Freeze';
  document.body.classList.toggle('frozen', state.frozen);
  if (!state.frozen) {
    for (const c of Object.values(charts)) c.invalidate();
    startDrawing();
  }
});

byId('burst').addEventListener('click', async () => {
  try {
    const r = await postBurst();
    say(`Burst: +${r.burst_sines} sines for 0.25 s`, false);
  } catch (e) {
    say(`Burst refused: ${e instanceof Error ? e.message : String(e)}`, true);
  }
});

const saveTrace = /** @type {HTMLButtonElement} */ (byId('save-trace'));
const traceSeconds = /** @type {HTMLInputElement} */ (byId('trace-seconds'));
saveTrace.addEventListener('click', async () => {
  // The server checks the range and names it when refused (422), like every other field.
  const seconds = traceSeconds.value.trim() || '10';
  saveTrace.disabled = true;
  try {
    const t = await getTrace(Number(seconds));
    const url = URL.createObjectURL(t.blob);
    const a = document.createElement('a');
    a.href = url;
    a.download = t.filename;
    document.body.append(a);
    a.click();
    a.remove();
    // The download has its own copy once clicked; give the browser a moment before freeing it.
    setTimeout(() => URL.revokeObjectURL(url), 10000);
    say(`Trace saved: ${t.filename}, the last ${t.coveredSeconds.toFixed(1)} s of the ${seconds} asked (open it in ui.perfetto.dev)`, false);
  } catch (e) {
    say(`Trace refused: ${e instanceof Error ? e.message : String(e)}`, true);
  } finally {
    saveTrace.disabled = false;
  }
});

const presetSelect = /** @type {HTMLSelectElement} */ (byId('preset'));
presetSelect.addEventListener('change', () => {
  if (presetSelect.value !== 'custom') void controls.send('preset', { preset: presetSelect.value });
});

for (const box of /** @type {NodeListOf<HTMLInputElement>} */ (document.querySelectorAll('input[data-view]'))) {
  box.addEventListener('change', () => {
    const name = box.dataset.view ?? '';
    visible[name] = box.checked;
    const panel = /** @type {HTMLElement | null} */ (document.querySelector(`[data-panel="${name}"]`));
    if (panel) panel.hidden = !box.checked;
    if (box.checked && charts[name]) {
      charts[name].resize();
      charts[name].invalidate();
      updateAxis(name);
    }
  });
}

// ---- counters (text only; updated a few times a second, frozen or not) ----

/** @type {Map<string, string>} */
const shown = new Map();
/**
 * @param {string} id
 * @param {string} text
 */
function setText(id, text) {
  if (shown.get(id) === text) return;
  shown.set(id, text);
  byId(id).textContent = text;
}

setInterval(() => {
  const c = state.counts;
  if (!c) return;
  setText('c-dropouts', String(c.dropouts));
  setText('c-ring-drops', String(c.ring_drops));
  setText('c-skipped', String(c.skipped_periods));
  setText('c-buffers', String(c.buffers));
  setText('c-frames-lost', String(state.lostHere));
  const max = store.maxLoadSince(store.newest() - 1000);
  setText('c-max-load', max >= 0 ? `${max.toFixed(1)} %` : '–');
  const sines = store.newestSines();
  setText('c-sines', sines === null ? '–' : String(sines));
  controls.showInput(state.inputPeak);
}, 100);

// ---- status: controls, device, threads, frequency ----

let refreshing = false;
let refreshAgain = false;
async function refreshStatus() {
  if (refreshing) {
    refreshAgain = true;
    return;
  }
  refreshing = true;
  try {
    const s = await getStatus();
    state.status = s;
    showStatus(s);
  } catch (e) {
    say(`Could not read the status: ${e instanceof Error ? e.message : String(e)}`, true);
  } finally {
    refreshing = false;
    if (refreshAgain) {
      refreshAgain = false;
      void refreshStatus();
    }
  }
}
// No polling: every change the status shows bumps the frames' config_version (above), and
// what changes all the time (counts, power, frequencies, idle entries) comes in the frames.

/** @param {Status} s */
function showStatus(s) {
  controls.update(s);
  if (s.limits) [traceSeconds.min, traceSeconds.max] = s.limits.trace_seconds.map(String);
  explain.showStatus(s.explain);
  if (s.preset) presetSelect.value = s.preset;
  const cores = /** @type {CoresChart} */ (charts.cores);
  if (cores.cpus !== s.cpus.length) {
    cores.cpus = Math.max(1, s.cpus.length);
    cores.invalidate();
    updateAxis('cores');
  }
  byId('energy-source').textContent = s.power.estimated
    ? `estimated power in watts, last 30 s — ${s.power.source}`
    : `measured power in watts (${s.power.source}), last 30 s`;
  const info = byId('device-info');
  const d = s.device;
  const lines = [];
  if (d) {
    const ms = ((d.buffer_frames / d.sample_rate) * 1000).toFixed(2);
    lines.push(`${d.name} (${d.kind}): ${d.sample_rate} Hz, ${d.buffer_frames} frames (${ms} ms); driver thread: ${d.driver_thread}`);
    for (const n of d.notes) lines.push(n);
  }
  if (s.audio !== 'running') lines.push(`Audio ${s.audio}`);
  if (s.chord) {
    const c = s.chord;
    const extra = c.extra_copies_built > 0 ? `; xrunlab's own extra copies: ${c.extra_copies_in_play} of ${c.extra_copies_built} in play` : '';
    lines.push(`Chord "${c.name}" (notes ${c.notes.join(' ')}, ${c.partials_per_chord} partials) x ${c.apl_chords}, one per physical core as AudioPerfLab: up to ${c.apl_max_sines} sines${extra}; busy threads running: ${s.busy_threads ?? 0}`);
  }
  if (s.topology?.length) {
    const smt = s.topology.some((t) => t.smt_siblings.length > 1);
    const cores = s.topology.map((t) => `CPU${t.id}: package ${t.package_id ?? '?'} core ${t.core_id ?? '?'}${t.core_type ? ` (${t.core_type})` : ''}`);
    lines.push(`Topology: ${cores.join('; ')}; SMT ${smt ? 'in use' : 'not in use'}`);
  }
  const idle = s.idle;
  if (idle) {
    const first = idle.states[0]?.cpu;
    const states = idle.states.filter((st) => st.cpu === first).map((st) => `${st.name} (exit ${st.latency_us ?? '?'} µs)`);
    const entries = state.idleEntries ?? idle.states.reduce((n, st) => n + st.entries, 0);
    lines.push(states.length ? `Idle states (${idle.driver ?? 'driver unknown'}): ${states.join(', ')}; ${entries} entries on all CPUs since start` : `Idle states: ${idle.note}`);
  }
  lines.push(`Power: ${s.power.source}`);
  if (s.fault.stall_ms > 0) lines.push(`Fault injection: ${s.fault.stall_ms} ms stall every ${s.fault.every_ms} ms`);
  if (s.last_error) lines.push(`Last refusal: ${s.last_error}`);
  info.replaceChildren(...lines.map((l) => el('div', '', l)));
  const body = /** @type {HTMLElement} */ (document.querySelector('#threads tbody'));
  body.replaceChildren(
    ...(s.threads ?? []).map((t) => {
      const tr = document.createElement('tr');
      const name = el('td');
      const swatch = el('span', 'swatch');
      swatch.style.background = threadColor(t.index);
      name.append(swatch, t.index === 0 ? 'driver' : `worker ${t.index}`);
      tr.append(name, el('td', '', String(t.tid)), el('td', '', t.sched.obtained));
      for (const o of [t.sched.priority, t.sched.deadline, t.sched.uclamp, t.sched.affinity]) {
        const { text, kind } = summarize([['', o]]);
        const td = el('td', `outcome-${kind}`, text);
        tr.append(td);
      }
      return tr;
    }),
  );
  const legend = byId('legend-work');
  legend.replaceChildren(
    ...(s.threads ?? []).map((t) => {
      const item = el('span', 'item');
      const swatch = el('span', 'swatch');
      swatch.style.background = threadColor(t.index);
      item.append(swatch, t.index === 0 ? 'driver' : `worker ${t.index}`);
      return item;
    }),
  );
  if (!s.freq.available) {
    byId('freq').replaceChildren(el('p', 'na', `Per-core frequency: ${s.freq.note}.`));
  }
}

/** @type {HTMLElement[]} */
let freqBars = [];
/** @param {number[]} khz */
function showFreqs(khz) {
  if (!visible.freq || state.frozen) return;
  const root = byId('freq');
  if (freqBars.length !== khz.length) {
    freqBars = khz.map((_, i) => {
      const row = el('div', 'freq-row');
      row.append(el('span', 'cpu', `cpu ${i}`), el('div', 'freq-bar'), el('span', 'mhz'));
      return row;
    });
    root.replaceChildren(...freqBars);
  }
  const cpus = state.status?.cpus ?? [];
  khz.forEach((f, i) => {
    const row = freqBars[i];
    const max = cpus[i]?.max_freq_khz ?? Math.max(...khz);
    const bar = /** @type {HTMLElement} */ (row.children[1]);
    bar.style.width = `${max > 0 ? Math.min(100, (f / max) * 100).toFixed(1) : 0}%`;
    row.children[2].textContent = f > 0 ? `${(f / 1000).toFixed(0)} MHz` : 'unknown';
  });
}

// Tests and curious users read the page's own numbers here.
Object.assign(window, { xrunlab: { store, power, charts, state, explain, history } });

await refreshStatus();
resizeAll();
startDrawing();
