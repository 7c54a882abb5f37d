// The History view: the flight recorder's xruns and drift events over a span on a timeline (marks coloured by card kind, drift marks, the server's gaps shaded) and in a list, filtered by node, culprit and kind; clicking an xrun opens its card in the card view the live blame cards use. Every text from the database goes in as text, never as markup. Runs on the page's main thread.
// @ts-check

import { ApiError, getHistory, getHistoryXrun } from './api.js';
import { el } from './controls.js';
import { ms, who } from './explain.js';

/** @typedef {import('./types.js').HistoryView} HistoryView */
/** @typedef {import('./types.js').HistoryXrunHead} HistoryXrunHead */
/** @typedef {import('./types.js').HistoryDrift} HistoryDrift */
/** @typedef {import('./types.js').HistoryXrun} HistoryXrun */
/** @typedef {import('./types.js').HistoryFacet} HistoryFacet */

const SVG = 'http://www.w3.org/2000/svg';

/** The card kinds' colours (watch's kinds); a kind this page does not know is grey. */
export const KIND_COLORS = /** @type {Record<string, string>} */ ({
  driver_woke_late: '#d62020',
  interrupt_late: '#e8740c',
  driver_ran_long: '#a0522d',
  node_ran_long: '#2f6fdf',
  node_woke_late: '#8e44ad',
  node_not_signalled: '#138d75',
  unexplained: '#7f7f7f',
});
const OTHER_KIND = '#444';
const DRIFT_COLOR = '#2b8a3e';
/** Rows the list shows at first, and more at each click: 2000 long rows take seconds to lay out. */
const LIST_PAGE = 200;

/** Timeline geometry, CSS pixels. */
const H = 96;
const XRUN_TOP = 6;
const XRUN_H = 44;
const DRIFT_Y = 64;
const AXIS_Y = 80;

/** @param {string} kind */
export function kindColor(kind) {
  return KIND_COLORS[kind] ?? OTHER_KIND;
}

/** @param {number} ns */
function local(ns) {
  const d = new Date(ns / 1e6);
  const p = (/** @type {number} */ n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

/**
 * @param {string} tag
 * @param {Record<string, string | number>} attrs
 */
function svg(tag, attrs) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  return e;
}

/**
 * A tooltip: the text of an SVG <title>.
 * @param {Element} e
 * @param {string} text
 */
function titled(e, text) {
  const t = document.createElementNS(SVG, 'title');
  t.textContent = text;
  e.append(t);
  return e;
}

export class History {
  /** @param {(text: string, bad: boolean) => void} say */
  constructor(say) {
    this.say = say;
    this.panel = /** @type {HTMLElement} */ (document.getElementById('history-panel'));
    this.box = /** @type {HTMLInputElement} */ (document.querySelector('input[data-view="history"]'));
    this.span = /** @type {HTMLSelectElement} */ (document.getElementById('history-span'));
    this.node = /** @type {HTMLSelectElement} */ (document.getElementById('history-node'));
    this.culprit = /** @type {HTMLSelectElement} */ (document.getElementById('history-culprit'));
    this.kind = /** @type {HTMLSelectElement} */ (document.getElementById('history-kind'));
    this.status = /** @type {HTMLElement} */ (document.getElementById('history-status'));
    this.timeline = /** @type {HTMLElement} */ (document.getElementById('history-timeline'));
    this.legend = /** @type {HTMLElement} */ (document.getElementById('history-legend'));
    this.card = /** @type {HTMLElement} */ (document.getElementById('history-card'));
    this.list = /** @type {HTMLElement} */ (document.querySelector('#history-list tbody'));
    /** @type {HistoryView | null} */
    this.view = null;
    /** @type {number | null} the xrun whose card is shown */
    this.selected = null;
    /** answers to older requests are dropped */
    this.asked = 0;
    this.box.addEventListener('change', () => {
      if (this.box.checked) void this.load();
    });
    for (const s of [this.span, this.node, this.culprit, this.kind]) s.addEventListener('change', () => void this.load());
    document.getElementById('history-refresh')?.addEventListener('click', () => void this.load());
    // One listener for all the marks and rows (up to 2000 of each), not one per element.
    const pick = (/** @type {Event} */ ev) => {
      const target = /** @type {Element | null} */ (ev.target);
      const item = target?.closest('[data-id], [data-drift]');
      if (!item || !this.panel.contains(item)) return false;
      const drift = item.getAttribute('data-drift');
      if (drift !== null) {
        const d = this.view?.drift.find((x) => String(x.id) === drift);
        if (d) this.showDrift(d);
      } else {
        void this.open(Number(item.getAttribute('data-id')));
      }
      return true;
    };
    for (const area of [this.timeline, this.list]) {
      area.addEventListener('click', pick);
      area.addEventListener('keydown', (ev) => {
        if (/** @type {KeyboardEvent} */ (ev).key === 'Enter') pick(ev);
      });
    }
    this.more = /** @type {HTMLButtonElement} */ (document.getElementById('history-more'));
    this.more.addEventListener('click', () => {
      this.rows += LIST_PAGE;
      if (this.view) this.drawList(this.view);
    });
    /** rows of the list shown: a page more at each "show more" */
    this.rows = LIST_PAGE;
    new ResizeObserver(() => {
      if (this.view && !this.panel.hidden) this.drawTimeline(this.view);
    }).observe(this.timeline);
  }

  /** Asks for the span and filters chosen, and shows the answer. */
  async load() {
    const asked = ++this.asked;
    this.rows = LIST_PAGE;
    this.status.textContent = 'Reading the history…';
    this.status.className = 'muted';
    try {
      const answer = await getHistory({
        since: this.span.value,
        node: this.node.value,
        culprit: this.culprit.value,
        kind: this.kind.value,
      });
      if (asked !== this.asked) return;
      if (!answer.available) {
        const missing = /** @type {import('./types.js').HistoryMissing} */ (answer);
        this.view = null;
        this.status.replaceChildren(el('b', '', 'No history to show. '), `${missing.why}. To record one: ${missing.how}.`);
        this.status.className = 'empty';
        this.timeline.replaceChildren();
        this.legend.replaceChildren();
        this.list.replaceChildren();
        return;
      }
      this.show(/** @type {HistoryView} */ (answer));
    } catch (e) {
      if (asked !== this.asked) return;
      this.status.textContent = `The history could not be read: ${e instanceof Error ? e.message : String(e)}`;
      this.status.className = 'bad';
    }
  }

  /** @param {HistoryView} v */
  show(v) {
    this.view = v;
    this.fill(this.node, v.facets.nodes);
    this.fill(this.culprit, v.facets.culprits);
    this.fill(this.kind, v.facets.kinds);
    const n = v.matching;
    const plural = (/** @type {number} */ k, /** @type {string} */ one, /** @type {string} */ many) => `${k} ${k === 1 ? one : many}`;
    let text = plural(n, 'xrun', 'xruns');
    if (v.truncated) text += ` (the latest ${v.xruns.length} shown: choose a shorter span or a filter for the others)`;
    text += `, ${plural(v.drift_matching, 'drift event', 'drift events')}`;
    if (v.drift_truncated) text += ` (the latest ${v.drift.length} shown)`;
    text += `, ${plural(v.gaps.length, 'time', 'times')} the server was away; from ${v.db}`;
    this.status.textContent = text;
    this.status.className = '';
    this.drawTimeline(v);
    this.drawList(v);
  }

  /**
   * The choices of a filter, "all" first; a chosen value the span no longer has stays, so the
   * filter in force is always shown.
   * @param {HTMLSelectElement} select
   * @param {HistoryFacet[]} facets
   */
  fill(select, facets) {
    const chosen = select.value;
    const options = [el('option', '', 'all')];
    options[0].setAttribute('value', '');
    const values = facets.map((f) => f.value);
    if (chosen && !values.includes(chosen)) facets = [{ value: chosen, xruns: 0 }, ...facets];
    for (const f of facets) {
      const o = /** @type {HTMLOptionElement} */ (el('option', '', `${f.value} (${f.xruns})`));
      o.value = f.value;
      options.push(o);
    }
    select.replaceChildren(...options);
    select.value = chosen;
  }

  /** @param {HistoryView} v */
  drawTimeline(v) {
    const width = Math.max(200, this.timeline.clientWidth);
    const times = [...v.xruns.map((x) => x.time_ns), ...v.drift.map((d) => d.time_ns), ...v.gaps.map((g) => g.from_ns)];
    const end = v.until_ns ?? v.now_ns;
    let start = v.since_ns ?? (times.length ? Math.min(...times) : end - 3600e9);
    if (end - start < 60e9) start = end - 60e9;
    // A little room at both ends, so marks at the edges can be seen and clicked.
    const pad = (end - start) * 0.01;
    const t0 = start - pad;
    const span = end + pad - t0;
    const x = (/** @type {number} */ ns) => ((ns - t0) / span) * width;
    const root = svg('svg', { width, height: H, viewBox: `0 0 ${width} ${H}`, role: 'img' });
    root.setAttribute('aria-label', 'timeline of xruns and drift events');
    for (const g of v.gaps) {
      const from = Math.max(x(g.from_ns), 0);
      const to = Math.min(x(g.to_ns ?? end), width);
      const r = svg('rect', { class: 'gap', x: from, y: 0, width: Math.max(to - from, 2), height: AXIS_Y, 'data-testid': 'history-gap' });
      root.append(titled(r, `the ${g.server} server was away from ${local(g.from_ns)} to ${g.to_ns === null ? 'the end of the session' : local(g.to_ns)}: ${g.reason}`));
    }
    root.append(svg('line', { class: 'axis-line', x1: 0, x2: width, y1: AXIS_Y, y2: AXIS_Y }));
    for (const [frac, label] of this.ticks(t0, span)) {
      const tx = frac * width;
      root.append(svg('line', { class: 'tick', x1: tx, x2: tx, y1: AXIS_Y, y2: AXIS_Y + 4 }));
      const text = svg('text', { x: tx, y: H - 2, 'text-anchor': frac < 0.05 ? 'start' : frac > 0.95 ? 'end' : 'middle' });
      text.textContent = label;
      root.append(text);
    }
    for (const d of v.drift) {
      const cx = x(d.time_ns);
      const mark = svg('path', { class: 'mark drift', d: `M${cx} ${DRIFT_Y - 7}l6 7l-6 7l-6 -7z`, fill: DRIFT_COLOR, 'data-drift': d.id, 'data-testid': 'drift-mark', tabindex: 0 });
      titled(mark, `${local(d.time_ns)}: ${d.words}`);
      root.append(mark);
    }
    for (const xr of v.xruns) {
      const mark = svg('rect', { class: 'mark xrun', x: x(xr.time_ns) - 2, y: XRUN_TOP, width: 4, height: XRUN_H, fill: kindColor(xr.kind), 'data-id': xr.id, 'data-kind': xr.kind, 'data-testid': 'xrun-mark', tabindex: 0 });
      if (xr.id === this.selected) mark.classList.add('selected');
      titled(mark, `${local(xr.time_ns)} ${xr.kind}: ${xr.summary}`);
      root.append(mark);
    }
    this.timeline.replaceChildren(root);
    const kinds = [...new Set(v.xruns.map((xr) => xr.kind))].sort();
    const item = (/** @type {string} */ color, /** @type {string} */ text, /** @type {string} */ cls) => {
      const i = el('span', 'item');
      const s = el('span', `swatch ${cls}`);
      s.style.background = color;
      i.append(s, text);
      return i;
    };
    this.legend.replaceChildren(
      ...kinds.map((k) => item(kindColor(k), k, '')),
      item(DRIFT_COLOR, 'drift event', 'diamond'),
      item('#ddd', 'server away', ''),
    );
  }

  /**
   * Axis labels: about six, at round times.
   * @param {number} t0 ns
   * @param {number} span ns
   * @returns {Array<[number, string]>}
   */
  ticks(t0, span) {
    const steps = [60, 300, 600, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 86400, 2 * 86400, 7 * 86400].map((s) => s * 1e9);
    const step = steps.find((s) => span / s <= 7) ?? steps[steps.length - 1];
    const out = /** @type {Array<[number, string]>} */ ([]);
    const offset = new Date().getTimezoneOffset() * 60e9;
    // Round in local time, so an hourly tick is on the hour where the user is.
    let t = Math.ceil((t0 - offset) / step) * step + offset;
    for (; t <= t0 + span; t += step) {
      const stamp = local(t);
      out.push([(t - t0) / span, step >= 86400e9 ? stamp.slice(0, 10) : span > 86400e9 ? stamp.slice(5, 16) : stamp.slice(11, 16)]);
    }
    return out;
  }

  /** @param {HistoryView} v */
  drawList(v) {
    const newest = v.xruns.slice(-this.rows).reverse();
    const rows = newest.map((xr) => {
      const tr = document.createElement('tr');
      tr.dataset.id = String(xr.id);
      tr.tabIndex = 0;
      if (xr.id === this.selected) tr.classList.add('selected');
      const kind = el('td', 'kind');
      const sw = el('span', 'swatch');
      sw.style.background = kindColor(xr.kind);
      kind.append(sw, xr.kind);
      tr.append(
        el('td', 'num', String(xr.id)),
        el('td', 'when', local(xr.time_ns)),
        el('td', '', xr.server),
        el('td', 'node', xr.node ?? '–'),
        kind,
        el('td', 'culprit', xr.culprit ?? '–'),
        el('td', 'what', `${xr.summary}${xr.has_snapshot ? '  [trace]' : ''}`),
      );
      return tr;
    });
    if (!rows.length) {
      const tr = document.createElement('tr');
      const td = el('td', 'muted', 'No xrun on file matches: the recorder kept the audio clean over this span, or the filters leave none.');
      td.setAttribute('colspan', '7');
      tr.append(td);
      rows.push(tr);
    }
    this.list.replaceChildren(...rows);
    const left = v.xruns.length - newest.length;
    this.more.hidden = left <= 0;
    this.more.textContent = `Show ${Math.min(left, LIST_PAGE)} more (${left} older in this answer)`;
  }

  /** @param {number} id */
  select(id) {
    this.selected = id;
    for (const e of this.panel.querySelectorAll('.selected')) e.classList.remove('selected');
    for (const e of this.panel.querySelectorAll(`[data-id="${id}"]`)) e.classList.add('selected');
  }

  /**
   * Fetches xrun `id` and shows its card.
   * @param {number} id
   */
  async open(id) {
    this.select(id);
    this.card.replaceChildren(el('p', 'muted', `Xrun ${id}: reading its card…`));
    try {
      this.renderCard(await getHistoryXrun(id));
    } catch (e) {
      // A 404 says why (trimmed by retention, or no history any more).
      const why = e instanceof ApiError || e instanceof Error ? e.message : String(e);
      this.card.replaceChildren(el('p', 'bad', `Xrun ${id}: ${why}`));
    }
  }

  /** @param {HistoryDrift} d */
  showDrift(d) {
    const head = el('p', 'verdict', d.words);
    head.dataset.testid = 'verdict';
    this.card.replaceChildren(
      el('p', 'muted', `Drift at ${local(d.time_ns)}: ${d.kind} of ${d.subject}`),
      head,
      el('div', 'thread-blame', `before: ${d.before}; after: ${d.after}`),
    );
  }

  /**
   * The card of a recorded xrun (watch's card, with the drift before it), in the same view as
   * the live blame cards: a muted head line, the verdict, one block per thread accounted for.
   * @param {HistoryXrun} x
   */
  renderCard(x) {
    /** @type {any} */
    const c = x.card ?? {};
    const parts = [];
    parts.push(el('p', 'muted', `Xrun ${x.id} at ${local(x.time_ns)} on ${x.server}: ${x.kind}${x.culprit ? `, culprit ${x.culprit}` : ''}${x.has_snapshot ? `; a Perfetto trace is on file (xrunlab history --trace ${x.id} FILE)` : ''}`));
    const head = el('p', 'verdict', x.summary);
    head.dataset.testid = 'verdict';
    parts.push(head);
    for (const line of Array.isArray(c.drift_before) ? c.drift_before : []) parts.push(el('p', 'bad drift-before', String(line)));
    if (Array.isArray(c.path) && c.path.length) {
      parts.push(el('div', '', `path: ${c.path.map((/** @type {any} */ s) => (s.role === 'driver' ? `the driver "${s.name}"` : `"${s.name}"`)).join(' ← ')}`));
    }
    const timing = [];
    if (typeof c.wait_us === 'number') timing.push(`WAIT ${ms(c.wait_us)}`);
    if (typeof c.busy_us === 'number') timing.push(`BUSY ${c.busy_at_least ? 'at least ' : ''}${ms(c.busy_us)}`);
    if (typeof c.period_us === 'number') timing.push(`in a ${ms(c.period_us)} cycle`);
    if (timing.length) parts.push(el('div', '', `${x.node ? `"${x.node}"` : 'the graph'}: ${timing.join(', ')}`));
    if (c.kernel) parts.push(this.account(`${x.node ? `"${x.node}"` : 'the late node'}'s thread`, c.kernel));
    if (c.root) {
      const r = c.root;
      const whose = `root: ${r.role === 'driver' ? 'the driver' : 'node'} "${r.name}"`;
      if (r.account) parts.push(this.account(whose, r.account));
      else if (r.missing) parts.push(el('div', 'thread-blame muted', `${whose}: no kernel account (${r.missing})`));
    }
    if (c.kernel_missing) parts.push(el('p', 'muted', `No kernel events: ${c.kernel_missing}`));
    if (c.unexplained) parts.push(el('p', 'muted', `Unexplained: ${c.unexplained}`));
    if (c.faults) parts.push(el('div', '', `page faults: ${c.faults.major} major, ${c.faults.minor} minor`));
    const whole = el('details', 'whole-card');
    const json = el('pre', '', JSON.stringify(c, null, 2));
    whole.append(el('summary', '', 'the whole card (JSON)'), json);
    parts.push(whole);
    this.card.replaceChildren(...parts);
  }

  /**
   * A thread's kernel account, as a block of the card.
   * @param {string} title
   * @param {any} k
   */
  account(title, k) {
    const block = el('div', 'thread-blame');
    block.append(el('b', '', title), el('div', '', `${k.verdict}: ran ${ms(k.ran_us)}, waited ${ms(k.waited_us)}, blocked ${ms(k.blocked_us)}, interrupts ${ms(k.interrupt_us)}; ${k.migrations} migrations${k.lost_events ? `; the kernel lost ${k.lost_events} events` : ''}`));
    const culprits = Array.isArray(k.culprits) && k.culprits.length ? k.culprits : k.main_culprit ? [k.main_culprit] : [];
    if (culprits.length) {
      block.append(el('div', '', `took its time: ${culprits.slice(0, 4).map((/** @type {any} */ cu) => `${who(cu)} on CPU${cu.cpu} ${ms(cu.us)}`).join('; ')}`));
    }
    return block;
  }
}
