// The control panel: builds every engine control with the ranges the server gives in status.limits (the engine's own table; this file holds none), applies changes through PUT /api/config, shows what the machine refused and what took effect beside each real-time option. Runs on the page's main thread.
// @ts-check

import { ApiError, putConfig } from './api.js';

/** @typedef {import('./types.js').Status} Status */
/** @typedef {import('./types.js').Config} Config */
/** @typedef {import('./types.js').Outcome} Outcome */
/** @typedef {import('./types.js').Limits} Limits */

/**
 * @typedef {object} RangeSpec
 * @property {'range'} kind
 * @property {string} path config path, e.g. "busy.count"
 * @property {string} label
 * @property {LimitKey} limit which of status.limits is its allowed range (the number box's)
 * @property {(l: Limits) => number} [sliderMax] a narrower span for the slider (the box still takes the whole range)
 * @property {number} [step]
 * @property {string} [unit]
 * @property {boolean} [squared] slider position squared: fine control at the low end of a huge range
 * @property {string} [help]
 */
/**
 * @typedef {object} SelectSpec
 * @property {'select'} kind
 * @property {string} path
 * @property {string} label
 * @property {(s: Status) => Array<[string, string]>} options value, label
 * @property {boolean} [numeric]
 * @property {(s: Status) => string | null} [disabledWhy] a reason the device does not allow changing it
 * @property {string} [help]
 */
/**
 * @typedef {object} CheckSpec
 * @property {'check'} kind
 * @property {string} path
 * @property {string} label
 * @property {string} [help]
 */
/**
 * @typedef {object} OutcomeSpec
 * @property {'outcome'} kind
 * @property {string} label
 * @property {(s: Status) => string} [detail]
 * @property {(s: Status) => Array<[string, Outcome]>} outcomes labelled outcomes to summarize
 */
/**
 * @typedef {object} PrioritySpec
 * @property {'priority'} kind
 * @property {string} path
 * @property {string} label
 */
/** @typedef {RangeSpec | SelectSpec | CheckSpec | OutcomeSpec | PrioritySpec} ControlSpec */
/** @typedef {{[K in keyof Limits]: Limits[K] extends [number, number] ? K : never}[keyof Limits]} LimitKey */

/**
 * Each thread's outcome for one scheduling request.
 * @param {Status} s
 * @param {'priority' | 'deadline' | 'uclamp' | 'affinity'} which
 * @returns {Array<[string, Outcome]>}
 */
function threadOutcomes(s, which) {
  return (s.threads ?? []).map((t) => [t.index === 0 ? 'driver' : `worker ${t.index}`, t.sched[which]]);
}

/**
 * The sine sliders span AudioPerfLab's range: one chord per physical core. The number box
 * beside them accepts up to the engine's limit, which adds xrunlab's own extra chord copies
 * for loading fast machines.
 * @param {Limits} l
 */
function sineSliderMax(l) {
  return l.sines_apl_max;
}

/** @type {Array<[string, ControlSpec[]]>} */
const GROUPS = [
  [
    'Audio',
    [
      { kind: 'select', path: 'device', label: 'Device', options: (s) => s.devices.map((d) => [d, d]) },
      {
        kind: 'select',
        path: 'sample_rate',
        label: 'Sample rate',
        numeric: true,
        options: (s) => withCurrent(s.limits?.sample_rates ?? [], s.config?.sample_rate).map((r) => [String(r), `${r} Hz`]),
        disabledWhy: (s) => (s.device && !s.device.can_set_sample_rate ? `set by the ${s.device.kind} device` : null),
      },
      {
        kind: 'select',
        path: 'buffer_frames',
        label: 'Buffer size',
        numeric: true,
        options: (s) => withCurrent(s.limits?.buffer_sizes ?? [], s.config?.buffer_frames).map((r) => [String(r), `${r} frames`]),
        disabledWhy: (s) => (s.device && !s.device.can_set_buffer ? `set by the ${s.device.kind} device` : null),
        help: 'The preferred buffer size; the device may give another (shown after applying).',
      },
      { kind: 'check', path: 'input', label: 'Audio input (metered)' },
    ],
  ],
  [
    'Workload',
    [
      { kind: 'select', path: 'chord', label: 'Chord', options: () => [['apl', 'AudioPerfLab: notes 53 56 60 65'], ['apl-2020', 'AudioPerfLab before Oct 2020: 53 56 60']] },
      { kind: 'range', path: 'chords', label: 'Chords played', limit: 'chords', squared: true, help: 'AudioPerfLab plays the chord once per physical core; this sets the sine range.' },
      { kind: 'range', path: 'sines', label: 'Sines', limit: 'sines', sliderMax: sineSliderMax, squared: true, help: 'Sustained sine partials of the unison saw chord; the box accepts more (xrunlab\'s own extra chord copies).' },
      { kind: 'range', path: 'burst_sines', label: 'Burst waves', limit: 'sines', sliderMax: sineSliderMax, squared: true, help: 'Extra sines for 0.25 s when Burst is pressed.' },
      { kind: 'select', path: 'kernel', label: 'Kernel', options: () => [['reference', 'reference (scalar sinf)'], ['fast', 'fast (vectorised)']] },
      { kind: 'range', path: 'chunk_size', label: 'Chunk size', limit: 'chunk_size', squared: true, help: 'Partials handed out per claim; smaller chunks spread work more evenly.' },
    ],
  ],
  [
    'Threads',
    [
      { kind: 'range', path: 'threads', label: 'Processing threads', limit: 'threads' },
      {
        kind: 'select',
        path: 'driver_mode',
        label: 'Driver thread',
        options: () => [['processes_sines', 'processes sines'], ['waits_for_workers', 'waits for workers']],
      },
      { kind: 'range', path: 'min_load_pct', label: 'Minimum load', limit: 'min_load_pct', unit: '%', help: 'Keep audio threads busy (low-energy wait) until this share of the buffer; not shown as load.' },
      { kind: 'range', path: 'driver_spin_us', label: 'Driver spin', limit: 'driver_spin_us', unit: 'µs', help: "How long the driver busy-waits for the workers before it sleeps. 0 blocks at once, as AudioPerfLab's driver does; a spin saves a wake-up but is a minimum load of its own." },
    ],
  ],
  [
    'Busy threads',
    [
      { kind: 'range', path: 'busy.count', label: 'Count', limit: 'busy_count' },
      { kind: 'range', path: 'busy.period_ms', label: 'Period', limit: 'busy_period_ms', unit: 'ms' },
      { kind: 'range', path: 'busy.duty_pct', label: 'Duty', limit: 'busy_duty_pct', unit: '%' },
    ],
  ],
  [
    'Real-time options',
    [
      { kind: 'priority', path: 'rt.priority', label: 'Real-time priority' },
      { kind: 'select', path: 'rt.policy', label: 'Policy', options: () => [['fifo', 'SCHED_FIFO'], ['round_robin', 'SCHED_RR']] },
      { kind: 'outcome', label: 'priority', outcomes: (s) => threadOutcomes(s, 'priority') },
      { kind: 'check', path: 'rt.deadline', label: 'SCHED_DEADLINE' },
      { kind: 'range', path: 'rt.deadline_runtime_pct', label: 'Deadline runtime', limit: 'deadline_runtime_pct', unit: '%' },
      { kind: 'outcome', label: 'deadline', outcomes: (s) => threadOutcomes(s, 'deadline') },
      { kind: 'check', path: 'work_interval', label: 'Work interval (uclamp.min)', help: "Linux's nearest hint that the workers serve the audio deadline." },
      { kind: 'range', path: 'rt.uclamp_min', label: 'uclamp.min', limit: 'uclamp_min' },
      { kind: 'outcome', label: 'uclamp', outcomes: (s) => threadOutcomes(s, 'uclamp') },
      { kind: 'check', path: 'rt.pm_qos', label: 'PM QoS (/dev/cpu_dma_latency = 0)' },
      { kind: 'outcome', label: 'PM QoS', outcomes: (s) => (s.process_rt ? [['process', s.process_rt.pm_qos]] : []) },
      { kind: 'check', path: 'rt.mlock', label: 'Lock memory (mlockall)' },
      { kind: 'outcome', label: 'mlock', outcomes: (s) => (s.process_rt ? [['process', s.process_rt.mlock]] : []) },
      { kind: 'check', path: 'rt.pin', label: 'Pin each thread to a CPU' },
      { kind: 'outcome', label: 'affinity', outcomes: (s) => threadOutcomes(s, 'affinity') },
    ],
  ],
];

/**
 * @param {number[]} list
 * @param {number | undefined} current
 */
function withCurrent(list, current) {
  return current === undefined || list.includes(current) ? list : [...list, current].sort((a, b) => a - b);
}

/**
 * @param {any} obj
 * @param {string} path
 * @returns {any}
 */
function getPath(obj, path) {
  return path.split('.').reduce((o, k) => (o == null ? undefined : o[k]), obj);
}

/**
 * {"busy.count": 2} -> {"busy": {"count": 2}}
 * @param {string} path
 * @param {unknown} value
 * @returns {Record<string, unknown>}
 */
export function patchFor(path, value) {
  const keys = path.split('.');
  /** @type {Record<string, unknown>} */
  let patch = { [keys[keys.length - 1]]: value };
  for (let i = keys.length - 2; i >= 0; i--) patch = { [keys[i]]: patch };
  return patch;
}

/**
 * One line summarizing outcomes: equal ones are merged ("applied: SCHED_FIFO 70 (3 threads)").
 * @param {Array<[string, Outcome]>} outcomes
 * @returns {{text: string, kind: string}}
 */
export function summarize(outcomes) {
  if (outcomes.length === 0) return { text: 'no threads yet', kind: 'none' };
  /** @param {Outcome} o */
  const line = (o) => {
    switch (o.status) {
      case 'applied':
        return `applied: ${o.detail}`;
      case 'refused':
        return `refused: ${o.reason}; running with ${o.fallback}`;
      case 'unsupported':
        return `unsupported: ${o.reason}`;
      default:
        return 'not requested';
    }
  };
  /** @type {Map<string, string[]>} */
  const groups = new Map();
  for (const [who, o] of outcomes) {
    const l = line(o);
    groups.set(l, [...(groups.get(l) ?? []), who]);
  }
  const worst = outcomes.some(([, o]) => o.status === 'refused' || o.status === 'unsupported')
    ? 'refused'
    : outcomes.every(([, o]) => o.status === 'applied')
      ? 'applied'
      : 'none';
  if (groups.size === 1) {
    const [l] = groups.keys();
    return { text: outcomes.length > 1 ? `${l} (all ${outcomes.length})` : l, kind: worst };
  }
  return { text: [...groups].map(([l, who]) => `${who.join(', ')}: ${l}`).join(' · '), kind: worst };
}

/** The control panel bound to the engine. */
export class Controls {
  /**
   * @param {HTMLElement} root
   * @param {(text: string, bad: boolean) => void} say shows a message to the user
   * @param {() => void} changed called after a change was applied (to re-read the status)
   */
  constructor(root, say, changed) {
    this.root = root;
    this.say = say;
    this.changed = changed;
    /** @type {Status | null} */
    this.status = null;
    /** @type {Array<(s: Status) => void>} */
    this.updaters = [];
    /** @type {Map<string, HTMLElement>} */
    this.errors = new Map();
    this.busy = false;
    /**
     * Paths whose change is being applied: a status frame that comes before the engine has it
     * still shows the old value, and must not undo what the user just set (a box they ticked
     * would untick itself for a moment). The status read after the change updates them.
     * @type {Set<string>}
     */
    this.pending = new Set();
    /** @type {HTMLElement | null} */
    this.meter = null;
    /** @type {HTMLElement | null} */
    this.meterText = null;
    for (const [title, specs] of GROUPS) {
      const group = el('fieldset', 'group');
      group.append(el('legend', '', title));
      for (const spec of specs) group.append(this.build(spec));
      if (title === 'Audio') group.append(this.buildMeter());
      root.append(group);
    }
  }

  /** @param {ControlSpec} spec */
  build(spec) {
    const row = el('div', 'row');
    if (spec.kind === 'outcome') {
      row.className = 'row outcome';
      row.dataset.outcome = spec.label;
      const out = el('div', 'took-effect');
      row.append(el('span', 'what', `${spec.label}:`), out);
      this.updaters.push((s) => {
        const { text, kind } = summarize(spec.outcomes(s));
        out.textContent = text;
        out.dataset.kind = kind;
      });
      return row;
    }
    row.dataset.path = spec.path;
    const label = /** @type {HTMLLabelElement} */ (el('label', 'name', spec.label));
    const err = el('div', 'error');
    err.hidden = true;
    this.errors.set(spec.path, err);
    if ('help' in spec && spec.help) row.title = spec.help;
    if (spec.kind === 'range') {
      const slider = /** @type {HTMLInputElement} */ (el('input'));
      slider.type = 'range';
      const num = /** @type {HTMLInputElement} */ (el('input'));
      num.type = 'number';
      num.className = 'num';
      num.step = String(spec.step ?? 1);
      slider.setAttribute('aria-label', spec.label);
      num.setAttribute('aria-label', `${spec.label} value`);
      const unit = el('span', 'unit', spec.unit ?? '');
      // Positions of a squared slider: fine control at the low end of a huge range.
      const RES = 1000;
      /** @param {number} v */
      const toSlider = (v) => {
        const [min, max] = this.span(spec);
        return spec.squared ? Math.round(Math.sqrt(Math.max(0, v - min) / Math.max(1, max - min)) * RES) : v;
      };
      /** @param {number} p */
      const fromSlider = (p) => {
        const [min, max] = this.span(spec);
        return spec.squared ? Math.round(min + (p / RES) ** 2 * (max - min)) : p;
      };
      slider.addEventListener('input', () => {
        num.value = String(fromSlider(Number(slider.value)));
      });
      slider.addEventListener('change', () => this.apply(spec.path, fromSlider(Number(slider.value))));
      // What the updater last wrote into the number box: a box that has focus and holds
      // something else is being typed into, and the next status must not overwrite it.
      let shown = num.value;
      num.addEventListener('change', () => {
        shown = num.value;
        this.apply(spec.path, Number(num.value));
      });
      this.updaters.push((s) => {
        if (this.pending.has(spec.path)) return;
        const [min, max] = this.range(spec);
        const [, sliderMax] = this.span(spec);
        slider.min = String(spec.squared ? 0 : min);
        slider.max = String(spec.squared ? RES : sliderMax);
        slider.step = String(spec.squared ? 1 : spec.step ?? 1);
        slider.dataset.min = String(min);
        slider.dataset.max = String(sliderMax);
        num.min = String(min);
        num.max = String(max);
        const v = getPath(s.config, spec.path);
        const typing = document.activeElement === num && num.value !== shown;
        if (typeof v === 'number' && !typing) {
          slider.value = String(toSlider(v));
          num.value = String(v);
          shown = num.value;
        }
      });
      row.dataset.limit = spec.limit;
      label.htmlFor = `c-${spec.path}`;
      num.id = `c-${spec.path}`;
      row.append(label, slider, num, unit, err);
    } else if (spec.kind === 'select') {
      const select = /** @type {HTMLSelectElement} */ (el('select'));
      select.id = `c-${spec.path}`;
      label.htmlFor = select.id;
      const why = el('span', 'why');
      select.addEventListener('change', () => this.apply(spec.path, spec.numeric ? Number(select.value) : select.value));
      this.updaters.push((s) => {
        const options = spec.options(s);
        const key = options.map((o) => o[0]).join('|');
        if (select.dataset.options !== key) {
          select.replaceChildren(...options.map(([v, l]) => new Option(l, v)));
          select.dataset.options = key;
        }
        const v = spec.path === 'device' ? s.device?.kind : getPath(s.config, spec.path);
        if (v !== undefined) select.value = String(v);
        const reason = spec.disabledWhy?.(s) ?? null;
        select.disabled = reason !== null;
        why.textContent = reason ?? '';
      });
      row.append(label, select, why, err);
    } else if (spec.kind === 'check') {
      const box = /** @type {HTMLInputElement} */ (el('input'));
      box.type = 'checkbox';
      box.id = `c-${spec.path}`;
      label.htmlFor = box.id;
      box.addEventListener('change', () => this.apply(spec.path, box.checked));
      this.updaters.push((s) => {
        if (!this.pending.has(spec.path)) box.checked = Boolean(getPath(s.config, spec.path));
      });
      row.className = 'row check';
      row.append(box, label, err);
    } else {
      const box = /** @type {HTMLInputElement} */ (el('input'));
      box.type = 'checkbox';
      box.id = 'c-rt.priority-on';
      label.htmlFor = box.id;
      const num = /** @type {HTMLInputElement} */ (el('input'));
      num.type = 'number';
      num.className = 'num';
      num.id = 'c-rt.priority';
      num.setAttribute('aria-label', 'Real-time priority value');
      const send = () => this.apply('rt.priority', box.checked ? Number(num.value || this.status?.limits?.priority_default) : null);
      box.addEventListener('change', send);
      num.addEventListener('change', send);
      this.updaters.push((s) => {
        if (s.limits) [num.min, num.max] = s.limits.priority.map(String);
        if (this.pending.has('rt.priority')) return;
        const p = s.config?.rt.priority ?? null;
        box.checked = p !== null;
        num.disabled = p === null;
        if (p !== null) num.value = String(p);
      });
      row.className = 'row check';
      row.append(box, label, num, err);
    }
    return row;
  }

  buildMeter() {
    const row = el('div', 'row meter-row');
    row.append(el('span', 'name', 'Input level'));
    const meter = el('div', 'meter');
    const bar = el('div', 'bar');
    meter.append(bar);
    const text = el('span', 'unit', 'off');
    text.id = 'input-level';
    row.append(meter, text);
    this.meter = bar;
    this.meterText = text;
    return row;
  }

  /**
   * Shows the input peak (null: input off).
   * @param {number | null} peak
   */
  showInput(peak) {
    if (!this.meter || !this.meterText) return;
    if (peak === null) {
      this.meter.style.width = '0%';
      this.meterText.textContent = this.status?.config?.input ? 'no signal' : 'off';
      return;
    }
    const db = peak > 0 ? 20 * Math.log10(peak) : -Infinity;
    const frac = Math.max(0, Math.min(1, (db + 60) / 60));
    this.meter.style.width = `${(frac * 100).toFixed(1)}%`;
    this.meterText.textContent = Number.isFinite(db) ? `${db.toFixed(1)} dBFS` : '-∞ dBFS';
  }

  /**
   * The allowed range of a control, from status.limits (empty until the first status).
   * @param {RangeSpec} spec
   * @returns {[number, number]}
   */
  range(spec) {
    const l = this.status?.limits;
    return l ? l[spec.limit] : [0, 0];
  }

  /**
   * The slider's span: the allowed range, or a narrower one the spec asks for.
   * @param {RangeSpec} spec
   * @returns {[number, number]}
   */
  span(spec) {
    const [min, max] = this.range(spec);
    const l = this.status?.limits;
    return [min, spec.sliderMax && l ? Math.min(max, spec.sliderMax(l)) : max];
  }

  /**
   * Shows the engine's state in every control.
   * @param {Status} s
   */
  update(s) {
    this.status = s;
    for (const u of this.updaters) u(s);
  }

  /**
   * Applies one control's new value; a refusal is shown beside the control and the control
   * goes back to the value in force.
   * @param {string} path
   * @param {unknown} value
   */
  async apply(path, value) {
    return this.send(path, path === 'device' ? { device: value } : patchFor(path, value));
  }

  /**
   * @param {string} path where to show a refusal
   * @param {Record<string, unknown>} patch
   */
  async send(path, patch) {
    for (const e of this.errors.values()) e.hidden = true;
    this.root.classList.add('applying');
    this.pending.add(path);
    try {
      const r = await putConfig(patch);
      this.say(r.restarted ? 'Applied (audio restarted cleanly).' : 'Applied live.', false);
    } catch (e) {
      const body = e instanceof ApiError ? e.body : { error: String(e) };
      const where = this.errors.get(body.path ?? path) ?? this.errors.get(path);
      if (where) {
        where.textContent = body.error;
        where.hidden = false;
      }
      this.say(`Refused: ${body.error}`, true);
    } finally {
      this.pending.delete(path);
      this.root.classList.remove('applying');
      this.changed();
    }
  }
}

/**
 * @param {string} tag
 * @param {string} [cls]
 * @param {string} [text]
 * @returns {HTMLElement}
 */
export function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}
