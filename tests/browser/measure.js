// Measurements for the dashboard's report (not a test): the server threads' CPU use while a page streams, and the largest sine count without dropouts with the page open versus closed. Runs in node; drives the real binary and Debian's chromium.
// @ts-check
//
//   node measure.js [cpu|capacity|all]   (XRUNLAB_BIN overrides target/debug/xrunlab)

import { readFileSync, readdirSync } from 'node:fs';
import { launch, startServer } from './harness.js';

const TICKS_PER_S = 100;

/**
 * CPU ticks (user + system) per thread name of process `pid`.
 * @param {number} pid
 */
function threadTicks(pid) {
  /** @type {Map<string, number>} */
  const out = new Map();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const ticks = Number(fields[11]) + Number(fields[12]);
      out.set(name, (out.get(name) ?? 0) + ticks);
    } catch {
      // The thread ended between listing and reading.
    }
  }
  return out;
}

/**
 * @param {number} pid
 * @param {number} seconds
 */
async function cpuShare(pid, seconds) {
  const a = threadTicks(pid);
  await new Promise((r) => setTimeout(r, seconds * 1000));
  const b = threadTicks(pid);
  /** @type {Record<string, string>} */
  const pct = {};
  for (const [name, t] of b) pct[name] = `${(((t - (a.get(name) ?? 0)) / TICKS_PER_S / seconds) * 100).toFixed(1)} %`;
  return pct;
}

/**
 * A JSON API call with the server's token, as a script makes it.
 * @param {import('./harness.js').Server} server
 * @param {string} path
 * @param {unknown} [body]
 */
async function api(server, path, body) {
  const headers = { authorization: `Bearer ${server.token}` };
  const r = await fetch(new URL(path, server.base), body === undefined ? { headers } : { method: 'PUT', headers, body: JSON.stringify(body) });
  if (!r.ok) throw new Error(`${path}: ${r.status} ${await r.text()}`);
  return r.json();
}

/** Opens the printed URL (its token becomes the page's cookie) in a fresh chromium. */
async function openPage(/** @type {import('./harness.js').Server} */ server) {
  const { context, close } = await launch();
  const page = await context.newPage();
  await page.goto(server.url);
  // Measure a page that streams, not a refusal.
  await page.waitForFunction(() => document.getElementById('conn')?.textContent === 'live');
  return { page, close };
}

/**
 * Dropouts in `seconds` at `sines`, after a settling second.
 * @param {import('./harness.js').Server} server
 * @param {number} sines
 * @param {number} seconds
 */
async function dropoutsAt(server, sines, seconds) {
  await api(server, '/api/config', { sines });
  await new Promise((r) => setTimeout(r, 1000));
  const a = (await api(server, '/api/status')).counts.dropouts;
  await new Promise((r) => setTimeout(r, seconds * 1000));
  const s = await api(server, '/api/status');
  return { dropouts: s.counts.dropouts - a };
}

/**
 * Largest sine count (in steps of 500) with no dropout in a 5 s window. The machine is shared,
 * so a step with dropouts is tried once more before it counts as beyond capacity.
 * @param {import('./harness.js').Server} server
 */
async function capacity(server) {
  let good = 0;
  for (let sines = 1000; sines <= 20000; sines += 500) {
    let { dropouts } = await dropoutsAt(server, sines, 5);
    if (dropouts > 0) ({ dropouts } = await dropoutsAt(server, sines, 5));
    console.log(`  ${sines} sines: ${dropouts} dropouts`);
    if (dropouts > 0) break;
    good = sines;
  }
  return good;
}

const what = process.argv[2] ?? 'all';
const server = await startServer([]);
const { proc } = server;
const pid = /** @type {number} */ (proc.pid);
try {
  if (what === 'cpu' || what === 'all') {
    console.log('threads\' CPU, no page open:', await cpuShare(pid, 10));
    const p = await openPage(server);
    await new Promise((r) => setTimeout(r, 2000));
    console.log('threads\' CPU, one page streaming:', await cpuShare(pid, 10));
    await p.close();
  }
  if (what === 'capacity' || what === 'all') {
    console.log('capacity, page closed:');
    const closed = await capacity(server);
    const p = await openPage(server);
    // Let the browser finish starting: its start-up is not what is being measured.
    await new Promise((r) => setTimeout(r, 3000));
    console.log('capacity, page open and drawing:');
    const open = await capacity(server);
    await p.close();
    console.log(`largest sines without dropouts in 5 s: page closed ${closed}, page open ${open}`);
  }
} finally {
  proc.kill('SIGINT');
}
