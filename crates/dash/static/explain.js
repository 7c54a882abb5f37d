// "Explain dropouts": the toolbar checkbox, the live culprit table, and the blame card of a dropout mark clicked on the load chart (fetched from /api/dropouts/{epoch}/{seq}); runs on the page's main thread.
// @ts-check

import { ApiError, getDropout, getExplain, putExplain } from './api.js';
import { el } from './controls.js';

/** @typedef {import('./types.js').Dropout} Dropout */
/** @typedef {import('./types.js').BlameCard} BlameCard */
/** @typedef {import('./types.js').Culprit} Culprit */
/** @typedef {import('./types.js').CulpritTotal} CulpritTotal */
/** @typedef {import('./types.js').ExplainView} ExplainView */
/** @typedef {import('./charts.js').LoadChart} LoadChart */

/** Dropout marks remembered for clicks: the load chart shows 3 s, this is far more. */
const MARKS_KEPT = 512;
/** A click this many CSS pixels from a mark still picks it. */
const CLICK_SLOP_PX = 8;
/** A card is built about 50 ms after its buffer; ask again this often, this many times. */
const CARD_RETRY_MS = 150;
const CARD_RETRIES = 12;

/** @param {number} us */
export function ms(us) {
  return `${(us / 1000).toFixed(2)} ms`;
}

/**
 * A culprit in a few words: a live blame card's, or a recorded watch card's (which has no irq
 * number nor earlier names).
 * @param {{kind: string, name: string, pid: number|null, irq?: number|null, policy: string, earlier_names?: string[], processes?: number}} c
 */
export function who(c) {
  const earlier = c.earlier_names ?? [];
  if (c.kind === 'task' && (c.processes ?? 1) > 1) {
    return `${c.name}: ${c.processes} processes (${earlier.join(', ')}), ${c.policy}`;
  }
  const was = earlier.length ? ` (was ${earlier.join(', ')})` : '';
  if (c.kind === 'task') return `${c.name}${was} (pid ${c.pid ?? '?'}, ${c.policy})`;
  if (c.kind === 'irq') return `irq ${c.irq ?? ''} ${c.name}`.replace('irq  ', 'irq ');
  if (c.kind === 'softirq') return `softirq ${c.name}`;
  return c.name;
}

/**
 * Why a thread waited on an idle CPU (an idle CPU is never a culprit).
 * @param {import('./types.js').IdleCause} c
 */
function idleWords(c) {
  if (c.case === 'steal') return `the vCPU on CPU${c.cpu} was not running (${ms(c.steal_us)} of hypervisor steal in the ${c.span_ms.toFixed(0)} ms around it)`;
  if (c.case === 'idle_exit') return `CPU${c.cpu} was waking from ${c.state} (${c.exit_latency_us} µs exit latency)`;
  return `unexplained: CPU${c.cpu} was idle while the thread was runnable (low confidence)`;
}

export class Explain {
  /**
   * @param {LoadChart} chart the load chart, whose red marks can be clicked
   * @param {(text: string, bad: boolean) => void} say
   */
  constructor(chart, say) {
    this.chart = chart;
    this.say = say;
    /** @type {Array<{t: number, epoch: number, seq: number}>} */
    this.marks = [];
    this.enabled = false;
    /** @type {ExplainView | null} */
    this.view = null;
    /** @type {Dropout | null} the card on show */
    this.shown = null;
    this.box = /** @type {HTMLInputElement} */ (document.getElementById('explain'));
    this.panel = /** @type {HTMLElement} */ (document.getElementById('explain-panel'));
    this.statusLine = /** @type {HTMLElement} */ (document.getElementById('explain-status'));
    this.card = /** @type {HTMLElement} */ (document.getElementById('blame-card'));
    this.culprits = /** @type {HTMLElement} */ (document.querySelector('#culprits tbody'));
    this.box.addEventListener('change', () => void this.toggle(this.box.checked));
    chart.canvas.addEventListener('click', (ev) => void this.click(ev));
    setInterval(() => {
      if (this.enabled) void this.refresh();
    }, 1000);
  }

  /**
   * Dropout marks of a frame: `[ts_ms, epoch, seq]`.
   * @param {Array<[number, number, number]>} drops
   */
  addMarks(drops) {
    for (const [t, epoch, seq] of drops) this.marks.push({ t, epoch, seq });
    if (this.marks.length > MARKS_KEPT) this.marks.splice(0, this.marks.length - MARKS_KEPT);
  }

  /**
   * What /api/status says (another page may have turned it on or off).
   * @param {{enabled: boolean} | undefined} s
   */
  showStatus(s) {
    if (!s || s.enabled === this.enabled) return;
    this.setEnabled(s.enabled);
    if (s.enabled) void this.refresh();
  }

  /** @param {boolean} on */
  setEnabled(on) {
    this.enabled = on;
    this.box.checked = on;
    this.panel.hidden = !on;
  }

  /** @param {boolean} on */
  async toggle(on) {
    try {
      const v = await putExplain(on);
      this.setEnabled(v.enabled);
      this.show(v);
      if (v.enabled && v.unavailable) this.say(`Explain dropouts: ${v.unavailable}`, true);
    } catch (e) {
      this.box.checked = this.enabled;
      this.say(`Explain dropouts refused: ${e instanceof Error ? e.message : String(e)}`, true);
    }
  }

  async refresh() {
    try {
      const v = await getExplain();
      this.setEnabled(v.enabled);
      this.show(v);
    } catch {
      // The next second tries again; the connection indicator says when the server is gone.
    }
  }

  /** @param {ExplainView} v */
  show(v) {
    this.view = v;
    if (!v.enabled) return;
    if (v.unavailable) {
      this.statusLine.textContent = `Kernel tracing unavailable: ${v.unavailable}. Dropouts are listed without a card.`;
      this.statusLine.className = 'bad';
    } else {
      const lost = v.lost_events ?? 0;
      this.statusLine.textContent =
        `Tracing CPUs ${(v.cpus ?? []).join(',')}: ${v.cards ?? 0} cards for ${v.dropouts ?? 0} dropouts` +
        `, ${lost} kernel events lost${lost > 0 ? ' (cards of those windows say so)' : ''}.` +
        ' Click a red mark on the load chart for its card.';
      this.statusLine.className = '';
    }
    this.culprits.replaceChildren(
      ...(v.top_culprits ?? []).map((c) => {
        const tr = document.createElement('tr');
        tr.append(
          el('td', '', who(c)),
          el('td', 'num', (c.stolen_us / 1000).toFixed(2)),
          el('td', 'num', String(c.dropouts)),
          el('td', 'num', String(c.main_culprit_of)),
          el('td', 'num', (c.max_us / 1000).toFixed(2)),
        );
        return tr;
      }),
    );
  }

  /**
   * Picks the dropout mark nearest the click (within a few pixels) and shows its card.
   * @param {MouseEvent} ev
   */
  async click(ev) {
    const c = this.chart.canvas;
    const r = c.getBoundingClientRect();
    if (!Number.isFinite(this.chart.edge) || r.width <= 0) return;
    const msPerCssPx = this.chart.windowMs / r.width;
    const t = this.chart.edge - (r.right - ev.clientX) * msPerCssPx;
    const slop = CLICK_SLOP_PX * msPerCssPx + (this.chart.store.bufferMs || 0);
    let best = null;
    for (const m of this.marks) {
      const d = Math.abs(m.t - t);
      if (d <= slop && (!best || d < Math.abs(best.t - t))) best = m;
    }
    if (!best) return;
    if (!this.enabled) {
      this.say('Turn on "Explain dropouts" to see why dropouts are late (needs root).', true);
      return;
    }
    await this.open(best.epoch, best.seq);
  }

  /**
   * Fetches and shows the card of dropout `epoch`/`seq`, waiting for it to be built.
   * @param {number} epoch
   * @param {number} seq
   */
  async open(epoch, seq) {
    this.card.replaceChildren(el('p', 'muted', `Dropout ${seq}: building its card…`));
    for (let i = 0; i < CARD_RETRIES; i++) {
      try {
        const d = await getDropout(epoch, seq);
        this.shown = d;
        this.render(d);
        return;
      } catch (e) {
        if (!(e instanceof ApiError) || e.status !== 404 || i === CARD_RETRIES - 1) {
          this.card.replaceChildren(el('p', 'bad', `Dropout ${seq}: ${e instanceof Error ? e.message : String(e)}`));
          return;
        }
        await new Promise((ok) => setTimeout(ok, CARD_RETRY_MS));
      }
    }
  }

  /** @param {Dropout} d */
  render(d) {
    const parts = [];
    const head = el('p', 'verdict');
    head.dataset.testid = 'verdict';
    const verdict = d.blame ? d.blame.verdict : `${d.kind}${d.notes.map((n) => `; ${n}`).join('')} (no card: ${d.no_card ?? 'unknown'})`;
    head.textContent = verdict;
    parts.push(el('p', 'muted', `Buffer ${d.seq} (audio start ${d.epoch}): ${d.kind}, ${ms(d.late_by_us)} past its deadline`));
    parts.push(head);
    const card = d.blame;
    if (card) {
      if (card.lost_events > 0 || !card.window_complete) {
        parts.push(el('p', 'bad', card.lost_events > 0 ? `The kernel lost ${card.lost_events} events in this window: causes may be missing.` : 'The trace window did not cover the whole buffer.'));
      }
      for (const t of card.threads) {
        const woken = t.woken_at_us === null ? 'wake-up not seen' : `woken +${ms(t.woken_at_us)}${t.wake_inferred ? ' (first run; the wake-up is not in the trace)' : ''}`;
        const median = t.median_us === null ? 'no median yet' : `median ${ms(t.median_us)}`;
        const block = el('div', 'thread-blame');
        block.append(
          el('b', '', `${t.role} (tid ${t.tid}) on CPU ${t.cpus.join(',') || '?'}`),
          el('div', '', `${woken}; waited ${ms(t.waited_us)} (${(t.wait_accounted * 100).toFixed(0)} % accounted); ran ${ms(t.ran_us)} (${median}); interrupts ${ms(t.interrupt_us)}`),
        );
        if (t.ran_instead.length) block.append(el('div', '', `ran instead: ${t.ran_instead.slice(0, 4).map((c) => `${who(c)} ${ms(c.us)}`).join('; ')}`));
        if (t.not_preempted_us > 0) block.append(el('div', '', `not preempted: ${ms(t.not_preempted_us)} of the wait behind tasks of a lower priority (kernel code on a kernel without full preemption, preemption off, or RT throttling)`));
        if (t.idle_cause) block.append(el('div', '', `idle CPU: waited ${ms(t.idle_wait_us)}: ${idleWords(t.idle_cause)}`));
        if (t.interrupts.length) block.append(el('div', '', `interrupts: ${t.interrupts.slice(0, 4).map((c) => `${who(c)} ${ms(c.us)}`).join('; ')}`));
        if (t.migrations.length) block.append(el('div', '', `migrations: ${t.migrations.map((m) => `CPU${m.from_cpu}→CPU${m.to_cpu} at +${ms(m.at_us)}`).join(', ')}`));
        if (t.sleeps.length) block.append(el('div', '', `sleeps: ${t.sleeps.slice(0, 4).map((s) => `${s.state} ${ms(s.us)}${s.woken_by ? `, woken by ${s.woken_by}` : ''}`).join('; ')}`));
        parts.push(block);
      }
    }
    this.card.replaceChildren(...parts);
  }
}
