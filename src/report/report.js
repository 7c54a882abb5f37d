// The report page's drawing: reads the results embedded in the page, loads the dashboard's chart module (inlined as text) through a blob: URL, and draws each result's figures on canvases with small bar, line, CCDF and change-bar helpers (a compare result: both sides' distributions, each metric's change with its interval, the fingerprint diff); runs on the page's main thread once, at load.
// @ts-check

/** Results as `xrunlab report` embedded them: `{ file, result }`, and for a compare result `ccdf`: per distribution, `{ name, unit, a, b }` with each side's `[x, fraction of samples at x or above]` points; for an experiment `ccdf`: per family of distributions, `{ name, unit, series: [{ name, points }] }`. */
const entries = JSON.parse(document.getElementById('xrunlab-data')?.textContent ?? '[]');

// The dashboard's charts.js, inlined as text: an inline module cannot import another by URL on
// a file:// page, so it is turned into a module URL here. Its thread colours are the dashboard's.
const chartsSource = document.getElementById('xrunlab-charts-js')?.textContent ?? '';
const charts = await import(URL.createObjectURL(new Blob([chartsSource], { type: 'text/javascript' })));
/** @type {(i: number) => string} */
const threadColor = charts.threadColor;

const INK = '#222222';
const GRID = '#e4e4e4';
const DROPOUT = '#d62020';
/** Colours of series that are not threads. */
const PALETTE = ['#2f6fdf', '#f28e2b', '#3aa655', '#8e5ec4', '#17a2b8', '#b07a3c', '#e377c2', '#9aa122', '#5f7f9f'];

/**
 * @param {string} tag
 * @param {string} [text]
 * @param {string} [cls]
 */
function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = text;
  if (cls) e.className = cls;
  return e;
}

/**
 * A new canvas in `parent`, titled, sized for the device pixel ratio; returns its 2d context and size in CSS pixels.
 * @param {HTMLElement} parent
 * @param {string} title
 * @param {string} kind the result kind, for tests
 * @param {number} [height] in CSS pixels
 */
function canvas(parent, title, kind, height) {
  const fig = el('figure');
  fig.append(el('figcaption', title));
  const c = document.createElement('canvas');
  c.dataset.kind = kind;
  const w = 640;
  const h = height ?? 280;
  const dpr = window.devicePixelRatio || 1;
  c.width = w * dpr;
  c.height = h * dpr;
  c.style.width = `${w}px`;
  c.style.height = `${h}px`;
  fig.append(c);
  parent.append(fig);
  const ctx = /** @type {CanvasRenderingContext2D} */ (c.getContext('2d'));
  ctx.scale(dpr, dpr);
  ctx.fillStyle = '#ffffff';
  ctx.fillRect(0, 0, w, h);
  return { ctx, w, h, c };
}

/** @param {number} v */
function fmt(v) {
  const a = Math.abs(v);
  if (a >= 1e6 || (a > 0 && a < 1e-2)) return v.toExponential(1);
  if (a >= 100) return v.toFixed(0);
  if (a >= 10) return v.toFixed(1);
  return v.toFixed(2);
}

/**
 * Axes with a y range 0..ymax (or log), a y label, and grid lines; returns the plot box.
 * @param {CanvasRenderingContext2D} ctx
 * @param {number} w
 * @param {number} h
 * @param {number} ymax
 * @param {string} yLabel
 */
function axes(ctx, w, h, ymax, yLabel) {
  const box = { x: 64, y: 14, w: w - 64 - 150, h: h - 14 - 42 };
  ctx.font = '11px sans-serif';
  ctx.strokeStyle = GRID;
  ctx.fillStyle = INK;
  ctx.textAlign = 'right';
  ctx.textBaseline = 'middle';
  for (let i = 0; i <= 4; i++) {
    const y = box.y + box.h - (i / 4) * box.h;
    ctx.beginPath();
    ctx.moveTo(box.x, y);
    ctx.lineTo(box.x + box.w, y);
    ctx.stroke();
    ctx.fillText(fmt((ymax * i) / 4), box.x - 4, y);
  }
  ctx.save();
  ctx.translate(12, box.y + box.h / 2);
  ctx.rotate(-Math.PI / 2);
  ctx.textAlign = 'center';
  ctx.fillText(yLabel, 0, 0);
  ctx.restore();
  ctx.strokeStyle = INK;
  ctx.beginPath();
  ctx.moveTo(box.x, box.y);
  ctx.lineTo(box.x, box.y + box.h);
  ctx.lineTo(box.x + box.w, box.y + box.h);
  ctx.stroke();
  return box;
}

/**
 * A legend at the right of the plot.
 * @param {CanvasRenderingContext2D} ctx
 * @param {number} w
 * @param {{ name: string, color: string }[]} items
 */
function legend(ctx, w, items) {
  ctx.textAlign = 'left';
  ctx.textBaseline = 'middle';
  items.forEach((s, i) => {
    ctx.fillStyle = s.color;
    ctx.fillRect(w - 140, 18 + i * 16, 10, 10);
    ctx.fillStyle = INK;
    ctx.fillText(s.name.slice(0, 22), w - 126, 23 + i * 16);
  });
}

/**
 * Grouped bars: one group per label, one bar per series; `whiskers[s][g]` draws a min..max line.
 * @param {HTMLElement} parent
 * @param {string} kind
 * @param {string} title
 * @param {string[]} labels
 * @param {{ name: string, color: string, values: (number | null)[], whiskers?: ([number, number] | null)[] }[]} series
 * @param {string} yLabel
 */
function bars(parent, kind, title, labels, series, yLabel) {
  const { ctx, w, h } = canvas(parent, title, kind);
  let ymax = 0;
  for (const s of series) {
    s.values.forEach((v, i) => {
      ymax = Math.max(ymax, v ?? 0, s.whiskers?.[i]?.[1] ?? 0);
    });
  }
  ymax = ymax > 0 ? ymax * 1.1 : 1;
  const box = axes(ctx, w, h, ymax, yLabel);
  const gw = box.w / Math.max(1, labels.length);
  const bw = (gw * 0.8) / Math.max(1, series.length);
  labels.forEach((label, g) => {
    series.forEach((s, k) => {
      const v = s.values[g];
      const x = box.x + g * gw + gw * 0.1 + k * bw;
      if (v !== null && v !== undefined) {
        const bh = (v / ymax) * box.h;
        ctx.fillStyle = s.color;
        ctx.fillRect(x, box.y + box.h - bh, Math.max(1, bw - 2), bh);
      }
      const wk = s.whiskers?.[g];
      if (wk) {
        ctx.strokeStyle = INK;
        const cx = x + bw / 2;
        ctx.beginPath();
        ctx.moveTo(cx, box.y + box.h - (wk[0] / ymax) * box.h);
        ctx.lineTo(cx, box.y + box.h - (wk[1] / ymax) * box.h);
        ctx.stroke();
      }
    });
    ctx.fillStyle = INK;
    ctx.textAlign = 'center';
    ctx.textBaseline = 'top';
    ctx.fillText(label.slice(0, 18), box.x + g * gw + gw / 2, box.y + box.h + 6);
  });
  legend(ctx, w, series);
}

/**
 * Lines of (x, y) points; `logX` spaces x by its logarithm (buffer sizes, intervals).
 * @param {HTMLElement} parent
 * @param {string} kind
 * @param {string} title
 * @param {{ name: string, color: string, points: [number, number][] }[]} series
 * @param {{ xLabel: string, yLabel: string, logX?: boolean }} o
 */
function lines(parent, kind, title, series, o) {
  const { ctx, w, h } = canvas(parent, title, kind);
  const all = series.flatMap((s) => s.points);
  const fx = (/** @type {number} */ x) => (o.logX ? Math.log2(Math.max(x, 1e-9)) : x);
  const xs = all.map((p) => fx(p[0]));
  const x0 = Math.min(...xs);
  const x1 = Math.max(...xs);
  const ymax = Math.max(1e-9, ...all.map((p) => p[1])) * 1.1;
  const box = axes(ctx, w, h, ymax, o.yLabel);
  const px = (/** @type {number} */ x) => box.x + (x1 > x0 ? ((fx(x) - x0) / (x1 - x0)) * box.w : box.w / 2);
  const py = (/** @type {number} */ y) => box.y + box.h - (y / ymax) * box.h;
  ctx.fillStyle = INK;
  ctx.textAlign = 'center';
  ctx.textBaseline = 'top';
  // Log axes label the measured x values (buffer sizes, intervals); linear ones five even steps.
  const xmin = Math.min(...all.map((p) => p[0]));
  const xmax = Math.max(...all.map((p) => p[0]));
  const ticks = o.logX ? [...new Set(all.map((p) => p[0]))].sort((a, b) => a - b) : [0, 1, 2, 3, 4].map((i) => xmin + ((xmax - xmin) * i) / 4);
  const step = Math.max(1, Math.ceil(ticks.length / 10));
  ticks.forEach((t, i) => {
    if (i % step === 0) ctx.fillText(Number.isInteger(t) ? String(t) : fmt(t), px(t), box.y + box.h + 4);
  });
  ctx.fillText(o.xLabel, box.x + box.w / 2, box.y + box.h + 22);
  for (const s of series) {
    ctx.strokeStyle = s.color;
    ctx.fillStyle = s.color;
    ctx.lineWidth = 2;
    ctx.beginPath();
    s.points.forEach(([x, y], i) => (i === 0 ? ctx.moveTo(px(x), py(y)) : ctx.lineTo(px(x), py(y))));
    ctx.stroke();
    for (const [x, y] of s.points) ctx.fillRect(px(x) - 2, py(y) - 2, 4, 4);
  }
  ctx.lineWidth = 1;
  legend(ctx, w, series);
}

/**
 * Groups `items` by `key` into named series of points.
 * @template T
 * @param {T[]} items
 * @param {(t: T) => string} key
 * @param {(t: T) => [number, number]} point
 */
function seriesBy(items, key, point) {
  /** @type {Map<string, [number, number][]>} */
  const m = new Map();
  for (const t of items) {
    const k = key(t);
    if (!m.has(k)) m.set(k, []);
    m.get(k)?.push(point(t));
  }
  return [...m.entries()].map(([name, points], i) => ({
    name,
    color: PALETTE[i % PALETTE.length],
    points: points.sort((a, b) => a[0] - b[0]),
  }));
}


/** Side colours of a comparison: A and B. */
const SIDES = [
  { key: 'a', name: 'A', color: PALETTE[0] },
  { key: 'b', name: 'B', color: PALETTE[1] },
];
/** Verdict colours: B better, worse, or no difference shown; undecided, not enough runs and not judged are grey (the GRID fallback). */
/** @type {Record<string, string>} */
const VERDICT = {
  better: '#3aa655',
  worse: DROPOUT,
  no_difference: '#9a9a9a',
  // No verdict: the data cannot decide, too few runs, or a maximum (never judged).
  undecided: '#c8c8c8',
  not_enough_runs: '#c8c8c8',
  not_judged: '#c8c8c8',
};

/**
 * Complementary cumulative distributions overlaid, as cyclictest users plot them: x linear in
 * the value, y the fraction of samples at x or above on a log scale (1 down to 1/count), drawn
 * as steps so the tail's last samples show. `data-series` on the canvas counts the lines.
 * @param {HTMLElement} parent
 * @param {string} kind
 * @param {string} title
 * @param {{ name: string, color: string, points: [number, number][] }[]} series
 * @param {string} xLabel
 */
function ccdfChart(parent, kind, title, series, xLabel) {
  const { ctx, w, h, c } = canvas(parent, title, kind);
  const drawn = series.filter((s) => s.points.length > 0);
  c.dataset.series = String(drawn.length);
  const all = drawn.flatMap((s) => s.points);
  const box = { x: 64, y: 14, w: w - 64 - 150, h: h - 14 - 42 };
  const x0 = Math.min(0, ...all.map((p) => p[0]));
  const x1 = Math.max(1e-9, ...all.map((p) => p[0])) * 1.05;
  // Decades from the smallest fraction shown up to 1.
  const decades = Math.max(1, Math.ceil(-Math.log10(Math.min(1, ...all.map((p) => p[1])))));
  const px = (/** @type {number} */ x) => box.x + ((x - x0) / (x1 - x0)) * box.w;
  const py = (/** @type {number} */ y) => box.y + (-Math.log10(y) / decades) * box.h;
  ctx.font = '11px sans-serif';
  ctx.fillStyle = INK;
  ctx.textAlign = 'right';
  ctx.textBaseline = 'middle';
  for (let d = 0; d <= decades; d++) {
    const y = box.y + (d / decades) * box.h;
    ctx.strokeStyle = GRID;
    ctx.beginPath();
    ctx.moveTo(box.x, y);
    ctx.lineTo(box.x + box.w, y);
    ctx.stroke();
    ctx.fillText(d === 0 ? '1' : `1e-${d}`, box.x - 4, y);
  }
  ctx.textAlign = 'center';
  ctx.textBaseline = 'top';
  for (let i = 0; i <= 4; i++) {
    const x = x0 + ((x1 - x0) * i) / 4;
    ctx.fillText(fmt(x), px(x), box.y + box.h + 4);
  }
  ctx.fillText(xLabel, box.x + box.w / 2, box.y + box.h + 22);
  ctx.save();
  ctx.translate(12, box.y + box.h / 2);
  ctx.rotate(-Math.PI / 2);
  ctx.fillText('fraction of samples ≥ x', 0, 0);
  ctx.restore();
  ctx.strokeStyle = INK;
  ctx.beginPath();
  ctx.moveTo(box.x, box.y);
  ctx.lineTo(box.x, box.y + box.h);
  ctx.lineTo(box.x + box.w, box.y + box.h);
  ctx.stroke();
  ctx.lineWidth = 2;
  for (const s of drawn) {
    ctx.strokeStyle = s.color;
    ctx.beginPath();
    s.points.forEach(([x, y], i) => {
      if (i === 0) ctx.moveTo(px(x), py(y));
      else {
        // A step: the fraction holds until the next recorded value.
        ctx.lineTo(px(x), py(s.points[i - 1][1]));
        ctx.lineTo(px(x), py(y));
      }
    });
    const [lx, ly] = s.points[s.points.length - 1];
    ctx.lineTo(px(lx), box.y + box.h);
    ctx.stroke();
  }
  ctx.lineWidth = 1;
  legend(ctx, w, drawn);
}

/**
 * One horizontal bar per metric: B's change against A in percent of A, its 95 % interval as a
 * whisker, coloured by the verdict. A metric without a change (A is 0) keeps its row, empty.
 * `data-bars` on the canvas counts the bars drawn.
 * @param {HTMLElement} parent
 * @param {string} kind
 * @param {{ metric: string, unit: string, change_pct: number | null, interval_pct: [number, number] | null, verdict: 'better' | 'worse' | 'no_difference' | 'undecided' | 'not_enough_runs' | 'not_judged' }[]} metrics
 */
function changeBars(parent, kind, metrics) {
  const row = 20;
  const { ctx, w, h, c } = canvas(parent, 'Change of B against A (% of A), with its 95 % interval', kind, 56 + row * metrics.length);
  const box = { x: 170, y: 14, w: w - 170 - 150, h: h - 14 - 42 };
  let span = 1;
  for (const m of metrics) {
    span = Math.max(span, Math.abs(m.change_pct ?? 0), ...(m.interval_pct ?? [0, 0]).map(Math.abs));
  }
  span *= 1.1;
  const px = (/** @type {number} */ v) => box.x + ((v + span) / (2 * span)) * box.w;
  ctx.font = '11px sans-serif';
  ctx.textBaseline = 'middle';
  let drawn = 0;
  metrics.forEach((m, i) => {
    const cy = box.y + i * row + row / 2;
    ctx.fillStyle = INK;
    ctx.textAlign = 'right';
    ctx.fillText(`${m.metric} (${m.unit})`.slice(0, 28), box.x - 6, cy);
    if (m.change_pct === null || m.change_pct === undefined) return;
    ctx.fillStyle = VERDICT[m.verdict] ?? GRID;
    const from = px(Math.min(0, m.change_pct));
    ctx.fillRect(from, cy - row * 0.3, Math.max(1, Math.abs(px(m.change_pct) - px(0))), row * 0.6);
    drawn++;
    if (m.interval_pct) {
      const [lo, hi] = m.interval_pct;
      ctx.strokeStyle = INK;
      ctx.beginPath();
      ctx.moveTo(px(lo), cy);
      ctx.lineTo(px(hi), cy);
      ctx.moveTo(px(lo), cy - 4);
      ctx.lineTo(px(lo), cy + 4);
      ctx.moveTo(px(hi), cy - 4);
      ctx.lineTo(px(hi), cy + 4);
      ctx.stroke();
    }
  });
  c.dataset.bars = String(drawn);
  ctx.strokeStyle = INK;
  ctx.beginPath();
  ctx.moveTo(px(0), box.y);
  ctx.lineTo(px(0), box.y + box.h);
  ctx.moveTo(box.x, box.y + box.h);
  ctx.lineTo(box.x + box.w, box.y + box.h);
  ctx.stroke();
  ctx.fillStyle = INK;
  ctx.textAlign = 'center';
  ctx.textBaseline = 'top';
  for (const v of [-span, -span / 2, 0, span / 2, span]) ctx.fillText(`${v > 0 ? '+' : ''}${fmt(v)} %`, px(v), box.y + box.h + 4);
  ctx.fillText('B − A, % of A (B lower is better)', box.x + box.w / 2, box.y + box.h + 22);
  legend(ctx, w, [
    { name: 'B better', color: VERDICT.better },
    { name: 'B worse', color: VERDICT.worse },
    { name: 'no difference shown', color: VERDICT.no_difference },
    { name: 'no verdict (undecided, too few runs, a maximum)', color: VERDICT.undecided },
  ]);
}

/**
 * A list of what differs between the sides, one item per field: "field: a → b".
 * @param {HTMLElement} parent
 * @param {string} title
 * @param {string} none shown when nothing differs
 * @param {string} cls
 * @param {{ field: string, a: string[], b: string[] }[]} changes
 */
function diffList(parent, title, none, cls, changes) {
  parent.append(el('h3', title));
  if (changes.length === 0) {
    parent.append(el('p', none, `${cls} none`));
    return;
  }
  const ul = el('ul', undefined, cls);
  for (const ch of changes) ul.append(el('li', `${ch.field}: ${ch.a.join(' / ')} → ${ch.b.join(' / ')}`));
  parent.append(ul);
}

/** @type {Record<string, (sec: HTMLElement, r: any, entry: any) => void>} */
const DRAW = {
  compare(sec, r, entry) {
    sec.append(el('p', `A: ${r.a_files.length} file(s), B: ${r.b_files.length} file(s)`, 'prov'));
    for (const n of r.notes ?? []) sec.append(el('p', `note: ${n}`, 'warn'));
    diffList(sec, 'What differs between A and B', 'nothing in the machine fingerprints', 'fingerprint-diff', r.fingerprint_diff ?? []);
    if ((r.workload_diff ?? []).length > 0) diffList(sec, 'Workloads that differ (compared anyway)', '', 'workload-diff', r.workload_diff);
    for (const d of entry.ccdf ?? []) {
      ccdfChart(
        sec,
        'compare',
        `${d.name}: fraction of samples at or above each value`,
        SIDES.map((s) => ({ name: `${s.name} (${s.key === 'a' ? r.a_files.length : r.b_files.length} runs)`, color: s.color, points: d[s.key] })),
        d.unit === 'us' ? 'µs' : '% of the buffer',
      );
    }
    changeBars(sec, 'compare', r.metrics ?? []);
  },
  run(sec, r) {
    const s = r.summary;
    const pct = ['p50', 'p99', 'p999', 'max'];
    bars(sec, 'run', 'Load (% of the buffer duration)', pct, [{ name: 'load', color: PALETTE[0], values: pct.map((p) => s.load_pct?.[p] ?? null) }], '%');
    bars(
      sec,
      'run',
      'Wake-up latency (µs)',
      pct,
      [
        { name: 'driver', color: threadColor(0), values: pct.map((p) => s.driver_wake_latency_us?.[p] ?? null) },
        { name: 'workers', color: threadColor(1), values: pct.map((p) => s.worker_wake_latency_us?.[p] ?? null) },
      ],
      'µs',
    );
    const threads = s.threads ?? [];
    bars(
      sec,
      'run',
      'Work distribution (share of the sines, %)',
      threads.map((/** @type {any} */ t) => (t.index === 0 ? 'driver' : `worker ${t.index}`)),
      threads.map((/** @type {any} */ t) => ({
        name: t.index === 0 ? 'driver' : `worker ${t.index}`,
        color: threadColor(t.index),
        values: threads.map((/** @type {any} */ u) => (u.index === t.index ? t.share_pct : null)),
      })),
      '%',
    );
    const kinds = ['dropouts', 'late_renders', 'incomplete_renders', 'buffers_with_device_xrun'];
    bars(sec, 'run', `Dropouts (of ${s.buffers} buffers)`, kinds, [{ name: 'buffers', color: DROPOUT, values: kinds.map((k) => s[k] ?? 0) }], 'buffers');
  },
  'probe.wakeup'(sec, r) {
    const res = r.result;
    lines(
      sec,
      r.kind,
      'Wake-up latency histogram',
      res.threads.map((/** @type {any} */ t) => ({
        name: `thread ${t.index}`,
        color: threadColor(t.index + 1),
        points: t.histogram.map((/** @type {number} */ n, /** @type {number} */ us) => [us, n]).filter((/** @type {[number, number]} */ p, /** @type {number} */ i, /** @type {any[]} */ a) => p[1] > 0 || (i > 0 && a[i - 1][1] > 0)),
      })),
      { xLabel: 'latency (µs)', yLabel: 'wake-ups' },
    );
    const stats = ['min_us', 'avg_us', 'max_us'];
    bars(
      sec,
      r.kind,
      'Wake-up latency min / avg / max (µs)',
      stats.map((s) => s.replace('_us', '')),
      res.threads.map((/** @type {any} */ t) => ({ name: `thread ${t.index}`, color: threadColor(t.index + 1), values: stats.map((s) => t.latency[s]) })),
      'µs',
    );
  },
  'probe.sleep'(sec, r) {
    const pts = r.result.points;
    const key = (/** @type {any} */ p) => `${p.call} slack ${p.slack_ns} ${p.sched?.requested ?? ''}`;
    lines(sec, r.kind, 'CPU cost of sleeping', seriesBy(pts, key, (p) => [p.interval_us, p.cpu_pct]), { xLabel: 'interval (µs)', yLabel: 'CPU %', logX: true });
    lines(sec, r.kind, 'Oversleep p99', seriesBy(pts, key, (p) => [p.interval_us, p.oversleep_p99_us]), { xLabel: 'interval (µs)', yLabel: 'µs', logX: true });
  },
  'probe.placement'(sec, r) {
    const t = r.result.threads;
    bars(
      sec,
      r.kind,
      'Completion time per thread (stragglers red)',
      t.map((/** @type {any} */ x) => `thread ${x.index}`),
      [{ name: 'completion ms', color: PALETTE[0], values: t.map((/** @type {any} */ x) => (x.straggler ? null : x.completion_ms)) },
        { name: 'straggler', color: DROPOUT, values: t.map((/** @type {any} */ x) => (x.straggler ? x.completion_ms : null)) }],
      'ms',
    );
  },
  'sweep.threads'(sec, r) {
    const pts = r.result.points;
    for (const wl of [...new Set(pts.map((/** @type {any} */ p) => p.workload))]) {
      const mine = pts.filter((/** @type {any} */ p) => p.workload === wl);
      lines(sec, r.kind, `Throughput against threads: ${wl}`, seriesBy(mine, (p) => p.class, (p) => [p.threads, p.throughput]), { xLabel: 'threads', yLabel: 'units/s' });
    }
  },
  'sweep.buffer'(sec, r) {
    const pts = r.result.points;
    lines(
      sec,
      r.kind,
      `Audio-thread CPU against buffer size (${r.result.params.sines} sines)`,
      [
        { name: '%CPU', color: PALETTE[0], points: pts.map((/** @type {any} */ p) => [p.buffer, p.cpu_pct]) },
        { name: '%usr', color: PALETTE[1], points: pts.map((/** @type {any} */ p) => [p.buffer, p.user_pct]) },
        { name: '%system', color: PALETTE[2], points: pts.map((/** @type {any} */ p) => [p.buffer, p.system_pct]) },
      ],
      { xLabel: 'buffer (frames)', yLabel: 'CPU % (sum of threads)', logX: true },
    );
    lines(
      sec,
      r.kind,
      'Wake-ups per second',
      [
        { name: 'buffers/s', color: PALETTE[0], points: pts.map((/** @type {any} */ p) => [p.buffer, p.buffers_per_s]) },
        { name: 'voluntary switches/s', color: PALETTE[1], points: pts.map((/** @type {any} */ p) => [p.buffer, p.voluntary_per_s]) },
      ],
      { xLabel: 'buffer (frames)', yLabel: 'per second', logX: true },
    );
  },
  capacity(sec, r) {
    const pts = r.result.points;
    const buffers = [...new Set(pts.map((/** @type {any} */ p) => p.buffer))].sort((a, b) => a - b);
    const presets = [...new Set(pts.map((/** @type {any} */ p) => p.preset))];
    const at = (/** @type {string} */ pr, /** @type {number} */ b) => pts.find((/** @type {any} */ p) => p.preset === pr && p.buffer === b);
    bars(
      sec,
      r.kind,
      'Capacity: largest dropout-free sine count',
      buffers.map((b) => `${b} frames`),
      presets.map((pr, i) => ({ name: pr, color: PALETTE[i], values: buffers.map((b) => at(pr, b)?.sines ?? null) })),
      'sines',
    );
    bars(
      sec,
      r.kind,
      'Highest load at that count: median, min..max of the repeats',
      buffers.map((b) => `${b} frames`),
      presets.map((pr, i) => ({
        name: pr,
        color: PALETTE[i],
        values: buffers.map((b) => at(pr, b)?.max_load_pct_spread?.median ?? null),
        whiskers: buffers.map((b) => {
          const s = at(pr, b)?.max_load_pct_spread;
          return s ? [s.min, s.max] : null;
        }),
      })),
      '% of buffer',
    );
  },
  'probe.explain-cost'(sec, r) {
    const res = r.result;
    const modes = [res.without_explain, res.with_explain].filter(Boolean);
    const stats = [['load_p50_mean_pct', 'p50 (mean)'], ['load_p99_median_pct', 'p99 (median)']];
    bars(
      sec,
      r.kind,
      'Load without and with --explain',
      stats.map((s) => s[1]),
      modes.map((/** @type {any} */ m, /** @type {number} */ i) => ({ name: `--explain ${m.explain ? 'on' : 'off'}`, color: PALETTE[i], values: stats.map((s) => m[s[0]]) })),
      '% of buffer',
    );
    if (res.capacity.length > 0) {
      bars(
        sec,
        r.kind,
        'Capacity: largest dropout-free sine count',
        res.capacity.map((/** @type {any} */ c) => `--explain ${c.explain ? 'on' : 'off'}`),
        [{ name: 'sines', color: PALETTE[0], values: res.capacity.map((/** @type {any} */ c) => c.sines ?? null) }],
        'sines',
      );
    }
  },
};

const root = document.getElementById('report');
for (const entry of entries) {
  const { file, result } = entry;
  const sec = el('section');
  sec.dataset.file = file;
  const kind = result.schema === 'xrunlab.run/2' ? 'run' : result.schema === 'xrunlab.compare/1' ? 'compare' : result.kind;
  sec.append(el('h2', `${kind}: ${file}`));
  const p = result.provenance ?? {};
  sec.append(el('p', `${p.kernel ?? ''} ${p.cpu_model ?? ''} ${p.start_time ?? ''}${result.incomplete ? ' (incomplete: ' + result.end_reason + ')' : ''}${result.quick ? ' (--quick)' : ''}`, 'prov'));
  for (const w of result.warnings ?? result.scheduling?.warnings ?? []) sec.append(el('p', `warning: ${w}`, 'warn'));
  const draw = DRAW[kind];
  if (draw) draw(sec, result, entry);
  else sec.append(el('p', `no chart for kind ${kind}`, 'warn'));
  if (kind !== 'compare') {
    // An experiment's kept distributions: one chart per family, a line per point or thread.
    for (const d of entry.ccdf ?? []) {
      ccdfChart(
        sec,
        kind,
        `${d.name}: fraction of samples at or above each value`,
        d.series.map((/** @type {any} */ s, /** @type {number} */ i) => ({ name: s.name, color: PALETTE[i % PALETTE.length], points: s.points })),
        d.unit === 'us' ? 'µs' : '% of the buffer',
      );
    }
  }
  root?.append(sec);
}
document.body.dataset.drawn = String(document.querySelectorAll('canvas').length);

// A module (top-level await above); it exports nothing.
export {};
