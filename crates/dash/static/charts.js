// The scrolling canvas charts (load, work distribution, cores, energy, wake-up latency), drawn incrementally: each animation frame shifts the pixels already drawn and paints only the newly revealed columns. Runs on the page's main thread inside requestAnimationFrame.
// @ts-check

/** @typedef {import('./series.js').BufferStore} BufferStore */
/** @typedef {import('./series.js').SampleStore} SampleStore */

const BACKGROUND = '#ffffff';
const GRID = '#e4e4e4';
const GRID_STRONG = '#b8b8b8';
const LOAD_LINE = '#2f6fdf';
const DROPOUT = '#d62020';
const DROPOUT_BAND = 'rgba(214, 32, 32, 0.18)';
/** Workers' colours; red is left out because it means dropout. The driver is black. */
const WORKER_COLORS = ['#2f6fdf', '#f28e2b', '#3aa655', '#8e5ec4', '#17a2b8', '#b07a3c', '#e377c2', '#9aa122', '#5f7f9f', '#ffbf00'];
/** A value is held across columns without data for this many buffers, so large buffers still draw a continuous curve; longer gaps (a restart) stay blank. */
const HOLD_BUFFERS = 4;

/**
 * Colour of audio thread `index` (0 = driver, black as in AudioPerfLab).
 * @param {number} index
 */
export function threadColor(index) {
  return index === 0 ? '#000000' : WORKER_COLORS[(index - 1) % WORKER_COLORS.length];
}

/**
 * A chart whose x axis is the last `windowMs` of time, right edge = now.
 * Subclasses paint columns in `strip`.
 */
export class ScrollChart {
  /**
   * @param {HTMLCanvasElement} canvas
   * @param {number} windowMs
   */
  constructor(canvas, windowMs) {
    const ctx = canvas.getContext('2d', { alpha: false });
    if (!ctx) throw new Error('canvas 2d context unavailable');
    this.canvas = canvas;
    this.ctx = ctx;
    this.windowMs = windowMs;
    /** time at the right edge of what is on the canvas */
    this.edge = -Infinity;
    this.full = true;
    /** columns painted since load; tests and the frame-cost readout use it */
    this.columnsPainted = 0;
    this.dpr = 1;
  }

  /** Matches the canvas to its box; a new size needs a full repaint. */
  resize() {
    const r = this.canvas.getBoundingClientRect();
    this.dpr = window.devicePixelRatio || 1;
    const w = Math.max(1, Math.round(r.width * this.dpr));
    const h = Math.max(1, Math.round(r.height * this.dpr));
    if (w !== this.canvas.width || h !== this.canvas.height) {
      this.canvas.width = w;
      this.canvas.height = h;
      this.full = true;
    }
  }

  /** Next `render` repaints everything (after unfreezing, showing, rescaling). */
  invalidate() {
    this.full = true;
  }

  /**
   * Brings the canvas up to `edge` (ms, server time).
   * @param {number} edge
   */
  render(edge) {
    const { ctx, canvas } = this;
    const W = canvas.width;
    const H = canvas.height;
    const msPerPx = this.windowMs / W;
    if (this.full || edge < this.edge || edge - this.edge >= this.windowMs) {
      ctx.fillStyle = BACKGROUND;
      ctx.fillRect(0, 0, W, H);
      this.edge = edge;
      this.full = false;
      this.reset();
      this.strip(0, W, edge, msPerPx);
      this.columnsPainted += W;
      return;
    }
    const dx = Math.floor((edge - this.edge) / msPerPx);
    if (dx <= 0) return;
    // Advance by whole pixels only, so the sub-pixel remainder carries to the next frame.
    const newEdge = this.edge + dx * msPerPx;
    ctx.drawImage(canvas, dx, 0, W - dx, H, 0, 0, W - dx, H);
    ctx.fillStyle = BACKGROUND;
    ctx.fillRect(W - dx, 0, dx, H);
    this.edge = newEdge;
    this.strip(W - dx, W, newEdge, msPerPx);
    this.columnsPainted += dx;
  }

  /**
   * Repaints the columns from time `t` to the edge, for data that arrived after they were drawn.
   * @param {number} t
   */
  repaintFrom(t) {
    if (this.full || !Number.isFinite(this.edge)) return;
    const W = this.canvas.width;
    const msPerPx = this.windowMs / W;
    const x0 = Math.max(0, Math.floor(W - (this.edge - t) / msPerPx) - 1);
    if (x0 >= W) return;
    this.ctx.fillStyle = BACKGROUND;
    this.ctx.fillRect(x0, 0, W - x0, this.canvas.height);
    this.reset();
    this.strip(x0, W, this.edge, msPerPx);
    this.columnsPainted += W - x0;
  }

  /** Forgets per-strip continuity state before a full repaint. */
  reset() {}

  /**
   * Paints columns [x0, x1); column x covers times [edge - (W - x) * msPerPx, edge - (W - x - 1) * msPerPx).
   * @param {number} x0
   * @param {number} x1
   * @param {number} edge
   * @param {number} msPerPx
   */
  strip(x0, x1, edge, msPerPx) {
    void x0, x1, edge, msPerPx;
  }

  /**
   * Vertical lines at whole seconds, so scrolling is visible even without data.
   * @param {number} x0
   * @param {number} x1
   * @param {number} edge
   * @param {number} msPerPx
   */
  secondLines(x0, x1, edge, msPerPx) {
    const W = this.canvas.width;
    this.ctx.fillStyle = GRID;
    for (let x = x0; x < x1; x++) {
      const ta = edge - (W - x) * msPerPx;
      const tb = ta + msPerPx;
      if (Math.floor(ta / 1000) !== Math.floor(tb / 1000)) this.ctx.fillRect(x, 0, 1, this.canvas.height);
    }
  }

  /** @returns {Array<[number, string]>} y fractions from the top and their labels */
  axisLabels() {
    return [];
  }
}

/** Load: % of the buffer per buffer (the maximum in each column), dropouts in red. */
export class LoadChart extends ScrollChart {
  /**
   * @param {HTMLCanvasElement} canvas
   * @param {BufferStore} store
   */
  constructor(canvas, store) {
    super(canvas, 3000);
    this.store = store;
    /** the y axis tops out here; higher loads are drawn at the top */
    this.maxPct = 150;
    this.lastT = NaN;
    this.lastY = NaN;
  }

  reset() {
    this.lastT = NaN;
    this.lastY = NaN;
  }

  /** @param {number} pct */
  y(pct) {
    const H = this.canvas.height;
    return H - 1 - (Math.min(Math.max(pct, 0), this.maxPct) / this.maxPct) * (H - 3);
  }

  /**
   * @param {number} x0
   * @param {number} x1
   * @param {number} edge
   * @param {number} msPerPx
   */
  strip(x0, x1, edge, msPerPx) {
    const { ctx, store, canvas } = this;
    const W = canvas.width;
    const H = canvas.height;
    this.secondLines(x0, x1, edge, msPerPx);
    ctx.fillStyle = GRID;
    ctx.fillRect(x0, Math.round(this.y(50)), x1 - x0, 1);
    ctx.fillStyle = GRID_STRONG;
    ctx.fillRect(x0, Math.round(this.y(100)), x1 - x0, 1);
    const hold = HOLD_BUFFERS * store.bufferMs + msPerPx;
    const cap = store.cap;
    let i = store.lowerBound(edge - (W - x0) * msPerPx);
    ctx.beginPath();
    ctx.strokeStyle = LOAD_LINE;
    ctx.lineWidth = 1.5 * this.dpr;
    if (!Number.isNaN(this.lastY)) ctx.moveTo(W - (edge - this.lastT) / msPerPx - 0.5, this.lastY);
    for (let x = x0; x < x1; x++) {
      const tb = edge - (W - x - 1) * msPerPx;
      let max = -1;
      let drop = 0;
      while (i < store.head && store.t[i % cap] < tb) {
        const k = i % cap;
        if (store.load[k] > max) max = store.load[k];
        drop |= store.drop[k];
        i++;
      }
      if (max < 0) continue;
      const y = this.y(max);
      const px = x + 0.5;
      if (!Number.isNaN(this.lastY) && tb - this.lastT <= hold) ctx.lineTo(px, y);
      else ctx.moveTo(px, y);
      if (drop) {
        ctx.fillStyle = DROPOUT_BAND;
        ctx.fillRect(x, 0, 1, H);
        ctx.fillStyle = DROPOUT;
        ctx.fillRect(x - 1, y - 1, 3, H - y + 1);
      }
      this.lastT = tb;
      this.lastY = y;
    }
    ctx.stroke();
  }

  /** @returns {Array<[number, string]>} */
  axisLabels() {
    const H = this.canvas.height;
    return [
      [this.y(100) / H, '100 %'],
      [this.y(50) / H, '50 %'],
      [this.y(150) / H, '150 %'],
    ];
  }
}

/** Work distribution: each thread's share of the active sines, stacked, driver at the bottom in black. */
export class WorkChart extends ScrollChart {
  /**
   * @param {HTMLCanvasElement} canvas
   * @param {BufferStore} store
   */
  constructor(canvas, store) {
    super(canvas, 3000);
    this.store = store;
    this.sums = new Float64Array(128);
    this.held = new Float64Array(128);
    this.heldThreads = 0;
    this.heldT = NaN;
  }

  reset() {
    this.heldT = NaN;
  }

  /**
   * @param {number} x0
   * @param {number} x1
   * @param {number} edge
   * @param {number} msPerPx
   */
  strip(x0, x1, edge, msPerPx) {
    const { ctx, store, canvas, sums, held } = this;
    const W = canvas.width;
    const H = canvas.height;
    const S = store.slots;
    const cap = store.cap;
    const hold = HOLD_BUFFERS * store.bufferMs + msPerPx;
    let i = store.lowerBound(edge - (W - x0) * msPerPx);
    for (let x = x0; x < x1; x++) {
      const tb = edge - (W - x - 1) * msPerPx;
      const n = Math.min(store.threads, sums.length);
      let any = false;
      sums.fill(0, 0, n);
      while (i < store.head && store.t[i % cap] < tb) {
        const base = (i % cap) * S;
        for (let th = 0; th < n; th++) sums[th] += store.sines[base + th];
        any = true;
        i++;
      }
      if (any) {
        let total = 0;
        for (let th = 0; th < n; th++) total += sums[th];
        if (total <= 0) {
          this.heldT = NaN;
          continue;
        }
        for (let th = 0; th < n; th++) held[th] = sums[th] / total;
        this.heldThreads = n;
        this.heldT = tb;
      } else if (Number.isNaN(this.heldT) || tb - this.heldT > hold) {
        continue;
      }
      let y = H;
      for (let th = 0; th < this.heldThreads; th++) {
        const h = held[th] * H;
        if (h <= 0) continue;
        ctx.fillStyle = threadColor(th);
        ctx.fillRect(x, y - h, 1, h);
        y -= h;
      }
    }
  }
}

/** Cores: one row per CPU, coloured by the audio thread that ran there in each time slice; white: none. */
export class CoresChart extends ScrollChart {
  /**
   * @param {HTMLCanvasElement} canvas
   * @param {BufferStore} store
   */
  constructor(canvas, store) {
    super(canvas, 3000);
    this.store = store;
    /** CPUs the machine has (from /api/status); more are added if a thread reports a higher CPU */
    this.cpus = 1;
    this.owner = new Int16Array(1024);
    this.heldT = NaN;
  }

  reset() {
    this.heldT = NaN;
  }

  rows() {
    return Math.max(1, Math.min(this.owner.length, Math.max(this.cpus, this.store.cpusSeen)));
  }

  /**
   * @param {number} x0
   * @param {number} x1
   * @param {number} edge
   * @param {number} msPerPx
   */
  strip(x0, x1, edge, msPerPx) {
    const { ctx, store, canvas, owner } = this;
    const W = canvas.width;
    const H = canvas.height;
    const rows = this.rows();
    const rowH = H / rows;
    const S = store.slots;
    const cap = store.cap;
    const hold = HOLD_BUFFERS * store.bufferMs + msPerPx;
    ctx.fillStyle = GRID;
    for (let r = 1; r < rows; r++) ctx.fillRect(x0, Math.round(r * rowH), x1 - x0, 1);
    let i = store.lowerBound(edge - (W - x0) * msPerPx);
    for (let x = x0; x < x1; x++) {
      const tb = edge - (W - x - 1) * msPerPx;
      let any = false;
      while (i < store.head && store.t[i % cap] < tb) {
        if (!any) owner.fill(-1, 0, rows);
        any = true;
        const base = (i % cap) * S;
        for (let th = 0; th < store.threads; th++) {
          const c = store.cpu[base + th];
          if (c >= 0 && c < rows) owner[c] = th;
        }
        i++;
      }
      if (any) this.heldT = tb;
      else if (Number.isNaN(this.heldT) || tb - this.heldT > hold) continue;
      for (let r = 0; r < rows; r++) {
        const th = owner[r];
        if (th < 0) continue;
        ctx.fillStyle = threadColor(th);
        ctx.fillRect(x, Math.round(r * rowH) + 1, 1, Math.max(1, Math.round((r + 1) * rowH) - Math.round(r * rowH) - 1));
      }
    }
  }

  /** @returns {Array<[number, string]>} */
  axisLabels() {
    const rows = this.rows();
    /** @type {Array<[number, string]>} */
    const out = [];
    const every = Math.ceil(rows / 16);
    for (let r = 0; r < rows; r += every) out.push([(r + 0.5) / rows, `cpu ${r}`]);
    return out;
  }
}

/** Wake-up latency of each thread (the maximum per column), log scale from 10 µs to the buffer duration. */
export class WakeChart extends ScrollChart {
  /**
   * @param {HTMLCanvasElement} canvas
   * @param {BufferStore} store
   */
  constructor(canvas, store) {
    super(canvas, 3000);
    this.store = store;
    this.lastT = new Float64Array(128).fill(NaN);
    this.lastY = new Float64Array(128).fill(NaN);
    this.minUs = 10;
    this.maxUs = 3000;
  }

  reset() {
    this.lastT.fill(NaN);
    this.lastY.fill(NaN);
  }

  /** The top of the scale follows the buffer duration; a change repaints. */
  rescale() {
    const top = Math.max(1000, this.store.bufferMs * 1000);
    if (top !== this.maxUs) {
      this.maxUs = top;
      this.invalidate();
      return true;
    }
    return false;
  }

  /** @param {number} us */
  y(us) {
    const H = this.canvas.height;
    const f = Math.log(Math.max(us, this.minUs) / this.minUs) / Math.log(this.maxUs / this.minUs);
    return H - 1 - Math.min(f, 1) * (H - 3);
  }

  /**
   * @param {number} x0
   * @param {number} x1
   * @param {number} edge
   * @param {number} msPerPx
   */
  strip(x0, x1, edge, msPerPx) {
    const { ctx, store, canvas } = this;
    const W = canvas.width;
    const S = store.slots;
    const cap = store.cap;
    const hold = HOLD_BUFFERS * store.bufferMs + msPerPx;
    this.secondLines(x0, x1, edge, msPerPx);
    ctx.fillStyle = GRID;
    ctx.fillRect(x0, Math.round(this.y(100)), x1 - x0, 1);
    ctx.fillRect(x0, Math.round(this.y(1000)), x1 - x0, 1);
    const start = store.lowerBound(edge - (W - x0) * msPerPx);
    ctx.lineWidth = 1.25 * this.dpr;
    const n = Math.min(store.threads, this.lastT.length);
    for (let th = 0; th < n; th++) {
      ctx.beginPath();
      ctx.strokeStyle = threadColor(th);
      if (!Number.isNaN(this.lastY[th])) ctx.moveTo(W - (edge - this.lastT[th]) / msPerPx - 0.5, this.lastY[th]);
      let i = start;
      for (let x = x0; x < x1; x++) {
        const tb = edge - (W - x - 1) * msPerPx;
        let max = -1;
        while (i < store.head && store.t[i % cap] < tb) {
          const w = store.wake[(i % cap) * S + th];
          if (w > max) max = w;
          i++;
        }
        if (max < 0) continue;
        const y = this.y(max);
        if (!Number.isNaN(this.lastY[th]) && tb - this.lastT[th] <= hold) ctx.lineTo(x + 0.5, y);
        else ctx.moveTo(x + 0.5, y);
        this.lastT[th] = tb;
        this.lastY[th] = y;
      }
      ctx.stroke();
    }
  }

  /** @returns {Array<[number, string]>} */
  axisLabels() {
    const H = this.canvas.height;
    return [
      [this.y(10) / H, '10 µs'],
      [this.y(100) / H, '100 µs'],
      [this.y(1000) / H, '1 ms'],
      [this.y(this.maxUs) / H, `${(this.maxUs / 1000).toFixed(1)} ms`],
    ];
  }
}

/** Energy: watts over the last 30 s, as an area. */
export class EnergyChart extends ScrollChart {
  /**
   * @param {HTMLCanvasElement} canvas
   * @param {SampleStore} samples
   */
  constructor(canvas, samples) {
    super(canvas, 30000);
    this.samples = samples;
    this.top = 1;
  }

  /** The scale grows to the largest sample in whole watts; a change repaints. */
  rescale() {
    const top = Math.max(1, Math.ceil(this.samples.max * 1.1));
    if (top !== this.top) {
      this.top = top;
      this.invalidate();
      return true;
    }
    return false;
  }

  /** @param {number} w */
  y(w) {
    const H = this.canvas.height;
    return H - 1 - (Math.min(w, this.top) / this.top) * (H - 3);
  }

  /**
   * @param {number} x0
   * @param {number} x1
   * @param {number} edge
   * @param {number} msPerPx
   */
  strip(x0, x1, edge, msPerPx) {
    const { ctx, samples, canvas } = this;
    const W = canvas.width;
    const H = canvas.height;
    this.secondLines(x0, x1, edge, msPerPx);
    const first = Math.max(0, samples.head - samples.cap);
    for (let x = x0; x < x1; x++) {
      const tb = edge - (W - x - 1) * msPerPx;
      const i = samples.indexAt(tb);
      // Before the first sample, or more than a second after the last, there is nothing to show.
      if (i < first || tb - samples.t[i % samples.cap] > 1000) continue;
      const y = this.y(samples.v[i % samples.cap]);
      ctx.fillStyle = '#cfe8d4';
      ctx.fillRect(x, y, 1, H - y);
      ctx.fillStyle = '#2b8a3e';
      ctx.fillRect(x, y - this.dpr, 1, 2 * this.dpr);
    }
  }

  /** @returns {Array<[number, string]>} */
  axisLabels() {
    const H = this.canvas.height;
    return [
      [this.y(this.top) / H, `${this.top} W`],
      [this.y(this.top / 2) / H, `${(this.top / 2).toFixed(1)} W`],
    ];
  }
}
