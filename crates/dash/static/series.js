// Telemetry history in preallocated ring buffers (per buffer, per thread, and sampled series), filled from WebSocket frames and read by the charts; runs on the page's main thread.
// @ts-check

/** @typedef {import('./types.js').Frame} Frame */

/**
 * The last `capacity` buffers. Typed arrays indexed by absolute buffer number modulo the
 * capacity, so adding a frame and drawing never allocate; per-thread values sit at
 * `slot * slots + thread`.
 */
export class BufferStore {
  /** @param {number} capacity buffers kept (must cover the longest chart window) */
  constructor(capacity) {
    this.cap = capacity;
    /** thread slots allocated per buffer */
    this.slots = 0;
    /** thread slots in the latest frame */
    this.threads = 0;
    /** buffers ever added; the newest is head - 1 */
    this.head = 0;
    this.t = new Float64Array(capacity);
    this.load = new Float32Array(capacity);
    this.drop = new Uint8Array(capacity);
    this.sines = new Uint32Array(0);
    this.cpu = new Int16Array(0);
    this.wake = new Int32Array(0);
    /** highest CPU number seen + 1 */
    this.cpusSeen = 0;
    this.bufferMs = 0;
    this.ensureSlots(4);
  }

  /**
   * Grows the per-thread arrays (rare: only when a config adds threads).
   * @param {number} n
   */
  ensureSlots(n) {
    if (n <= this.slots) return;
    const slots = Math.ceil(n / 4) * 4;
    const sines = new Uint32Array(this.cap * slots);
    const cpu = new Int16Array(this.cap * slots).fill(-1);
    const wake = new Int32Array(this.cap * slots).fill(-1);
    for (let i = 0; i < this.cap; i++) {
      for (let th = 0; th < this.slots; th++) {
        sines[i * slots + th] = this.sines[i * this.slots + th];
        cpu[i * slots + th] = this.cpu[i * this.slots + th];
        wake[i * slots + th] = this.wake[i * this.slots + th];
      }
    }
    this.sines = sines;
    this.cpu = cpu;
    this.wake = wake;
    this.slots = slots;
  }

  /** @param {Frame} f */
  push(f) {
    const nt = f.threads.length;
    this.ensureSlots(nt);
    this.threads = nt;
    this.bufferMs = f.buffer_ms || this.bufferMs;
    const S = this.slots;
    for (let k = 0; k < f.ts.length; k++) {
      const i = this.head % this.cap;
      this.t[i] = f.ts[k];
      this.load[i] = f.load[k];
      this.drop[i] = f.dropout[k];
      for (let th = 0; th < S; th++) {
        const j = i * S + th;
        if (th < nt) {
          const c = f.threads[th];
          this.sines[j] = c.sines[k];
          this.cpu[j] = c.cpu[k];
          this.wake[j] = c.wake_us[k];
          if (c.cpu[k] >= this.cpusSeen) this.cpusSeen = c.cpu[k] + 1;
        } else {
          this.sines[j] = 0;
          this.cpu[j] = -1;
          this.wake[j] = -1;
        }
      }
      this.head++;
    }
  }

  /** Oldest absolute index still held. */
  oldest() {
    return Math.max(0, this.head - this.cap);
  }

  /**
   * First absolute index whose time is at or after `time` (head when none).
   * @param {number} time ms
   */
  lowerBound(time) {
    let lo = this.oldest();
    let hi = this.head;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.t[mid % this.cap] < time) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** Time of the newest buffer, or -Infinity. */
  newest() {
    return this.head > 0 ? this.t[(this.head - 1) % this.cap] : -Infinity;
  }

  /** Sines all threads processed in the newest buffer, or null before the first. */
  newestSines() {
    if (this.head === 0) return null;
    const i = (this.head - 1) % this.cap;
    let sines = 0;
    for (let th = 0; th < this.threads; th++) sines += this.sines[i * this.slots + th];
    return sines;
  }

  /**
   * Highest load among buffers at or after `since`.
   * @param {number} since ms
   */
  maxLoadSince(since) {
    let max = -1;
    for (let i = this.lowerBound(since); i < this.head; i++) max = Math.max(max, this.load[i % this.cap]);
    return max;
  }
}

/** A sampled value over time (power), in a preallocated ring. */
export class SampleStore {
  /** @param {number} capacity */
  constructor(capacity) {
    this.cap = capacity;
    this.head = 0;
    this.t = new Float64Array(capacity);
    this.v = new Float32Array(capacity);
    this.max = 0;
  }

  /**
   * @param {number} t ms
   * @param {number} v
   */
  push(t, v) {
    const i = this.head % this.cap;
    this.t[i] = t;
    this.v[i] = v;
    this.head++;
    if (v > this.max) this.max = v;
  }

  /**
   * Absolute index of the last sample at or before `time`; -1 when none.
   * @param {number} time
   */
  indexAt(time) {
    let lo = Math.max(0, this.head - this.cap);
    let hi = this.head;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.t[mid % this.cap] <= time) lo = mid + 1;
      else hi = mid;
    }
    return lo - 1 >= Math.max(0, this.head - this.cap) ? lo - 1 : -1;
  }
}
