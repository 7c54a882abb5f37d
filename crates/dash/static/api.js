// The page's side of the JSON API and the telemetry WebSocket (with reconnect); runs on the page's main thread.
// @ts-check

/** @typedef {import('./types.js').Status} Status */
/** @typedef {import('./types.js').Config} Config */
/** @typedef {import('./types.js').Frame} Frame */
/** @typedef {import('./types.js').LaggedNote} LaggedNote */
/** @typedef {import('./types.js').ApiErrorBody} ApiErrorBody */

/** A refused request, carrying the server's body (which names the field and range). */
export class ApiError extends Error {
  /**
   * @param {number} status
   * @param {ApiErrorBody} body
   */
  constructor(status, body) {
    super(body.error);
    this.status = status;
    this.body = body;
  }
}

/**
 * @param {string} path
 * @param {RequestInit} [init]
 * @returns {Promise<any>}
 */
async function call(path, init) {
  const res = await fetch(path, { ...init, headers: { 'content-type': 'application/json' } });
  const text = await res.text();
  /** @type {any} */
  let body;
  try {
    body = JSON.parse(text);
  } catch {
    body = { error: text || res.statusText };
  }
  if (!res.ok) throw new ApiError(res.status, body);
  return body;
}

/** @returns {Promise<Status>} */
export function getStatus() {
  return call('/api/status');
}

/**
 * Merges `patch` onto the engine's config; the answer is the config in force.
 * @param {Record<string, unknown>} patch
 * @returns {Promise<Config & {preset: string, device: string, restarted: boolean}>}
 */
export function putConfig(patch) {
  return call('/api/config', { method: 'PUT', body: JSON.stringify(patch) });
}

/** @returns {Promise<{burst_sines: number}>} */
export function postBurst() {
  return call('/api/burst', { method: 'POST', body: '{}' });
}

/** @returns {Promise<import('./types.js').ExplainView>} */
export function getExplain() {
  return call('/api/explain');
}

/**
 * Turns "Explain dropouts" on or off.
 * @param {boolean} enabled
 * @returns {Promise<import('./types.js').ExplainView>}
 */
export function putExplain(enabled) {
  return call('/api/explain', { method: 'PUT', body: JSON.stringify({ enabled }) });
}

/**
 * One dropout and its blame card (404 until the card is built).
 * @param {number} epoch
 * @param {number} seq
 * @returns {Promise<import('./types.js').Dropout>}
 */
export function getDropout(epoch, seq) {
  return call(`/api/dropouts/${epoch}/${seq}`);
}

/**
 * The flight recorder's history over a span: xruns (without cards), drift, gaps, the filters'
 * choices; or, with no history to read, why and how to start recording.
 * @param {{since?: string, until?: string, node?: string, culprit?: string, kind?: string, limit?: number}} q
 * @returns {Promise<import('./types.js').HistoryAnswer>}
 */
export function getHistory(q) {
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(q)) if (v !== undefined && v !== '') params.set(k, String(v));
  const query = params.toString();
  return call(`/api/history${query ? `?${query}` : ''}`);
}

/**
 * One xrun of the history with its whole card.
 * @param {number} id
 * @returns {Promise<import('./types.js').HistoryXrun>}
 */
export function getHistoryXrun(id) {
  return call(`/api/history/xruns/${encodeURIComponent(String(id))}`);
}

/**
 * The last `seconds` (1..=60) as a Perfetto trace, for download.
 * @param {number} seconds
 * @returns {Promise<import('./types.js').TraceDownload>}
 */
export async function getTrace(seconds) {
  const res = await fetch(`/api/trace?seconds=${encodeURIComponent(String(seconds))}`);
  if (!res.ok) {
    const text = await res.text();
    /** @type {ApiErrorBody} */
    let body;
    try {
      body = JSON.parse(text);
    } catch {
      body = { error: text || res.statusText };
    }
    throw new ApiError(res.status, body);
  }
  const disposition = res.headers.get('content-disposition') ?? '';
  const filename = /filename="([^"]+)"/.exec(disposition)?.[1] ?? 'xrunlab-trace.json';
  const coveredSeconds = Number(res.headers.get('x-xrunlab-trace-seconds') ?? 'NaN');
  return { blob: await res.blob(), filename, coveredSeconds };
}

/**
 * Keeps a WebSocket to /ws open, reconnecting after a pause when it drops. A message the page
 * cannot read (not JSON, or a frame its handler chokes on) is passed to `onBad` and skipped:
 * the next frame carries on.
 * @param {(f: Frame) => void} onFrame
 * @param {(n: LaggedNote) => void} onLagged
 * @param {(open: boolean) => void} onState
 * @param {(why: string) => void} onBad
 */
export function connect(onFrame, onLagged, onState, onBad) {
  const url = `ws://${location.host}/ws`;
  const open = () => {
    const ws = new WebSocket(url);
    ws.onopen = () => onState(true);
    ws.onmessage = (ev) => {
      if (typeof ev.data !== 'string') return;
      try {
        const msg = JSON.parse(ev.data);
        if (msg?.type === 'frame') onFrame(msg);
        else if (msg?.type === 'lagged') onLagged(msg);
      } catch (e) {
        onBad(e instanceof Error ? e.message : String(e));
      }
    };
    ws.onclose = () => {
      onState(false);
      setTimeout(open, 1000);
    };
  };
  open();
}
