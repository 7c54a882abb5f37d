// Measurements for the dashboard's report (not a test): the server threads' CPU use while a page streams, and the largest sine count without dropouts with the page open versus closed. Runs in node; drives the real binary and Debian's chromium.
// @ts-check
//
//   node measure.js [cpu|capacity|all]   (XRUNLAB_BIN overrides target/debug/xrunlab)

import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const here = dirname(fileURLToPath(import.meta.url));
const BIN = process.env.XRUNLAB_BIN ?? join(here, '../../target/debug/xrunlab');
const TICKS_PER_S = 100;

/** @returns {Promise<{proc: import('node:child_process').ChildProcess, url: string}>} */
function startServer() {
  return new Promise((resolve, reject) => {
    const proc = spawn(BIN, ['--port', '0'], { stdio: ['ignore', 'pipe', 'inherit'] });
    proc.stdout?.on('data', (d) => {
      const m = /http:\/\/127\.0\.0\.1:\d+\//.exec(String(d));
      if (m) resolve({ proc, url: m[0] });
    });
    proc.on('exit', (c) => reject(new Error(`xrunlab exited with ${c}`)));
  });
}

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
 * @param {string} url
 * @param {string} path
 * @param {unknown} [body]
 */
async function api(url, path, body) {
  const r = await fetch(new URL(path, url), body === undefined ? {} : { method: 'PUT', body: JSON.stringify(body) });
  return r.json();
}

async function openPage(/** @type {string} */ url) {
  const userData = mkdtempSync(join(tmpdir(), 'xrunlab-measure-'));
  const context = await chromium.launchPersistentContext(userData, {
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
    viewport: { width: 1400, height: 1000 },
  });
  const page = await context.newPage();
  await page.goto(url);
  return {
    page,
    close: async () => {
      await context.close();
      rmSync(userData, { recursive: true, force: true });
    },
  };
}

/**
 * Dropouts in `seconds` at `sines`, after a settling second.
 * @param {string} url
 * @param {number} sines
 * @param {number} seconds
 */
async function dropoutsAt(url, sines, seconds) {
  await api(url, '/api/config', { sines });
  await new Promise((r) => setTimeout(r, 1000));
  const a = (await api(url, '/api/status')).counts.dropouts;
  await new Promise((r) => setTimeout(r, seconds * 1000));
  const s = await api(url, '/api/status');
  return { dropouts: s.counts.dropouts - a };
}

/**
 * Largest sine count (in steps of 500) with no dropout in a 5 s window. The machine is shared,
 * so a step with dropouts is tried once more before it counts as beyond capacity.
 * @param {string} url
 */
async function capacity(url) {
  let good = 0;
  for (let sines = 1000; sines <= 20000; sines += 500) {
    let { dropouts } = await dropoutsAt(url, sines, 5);
    if (dropouts > 0) ({ dropouts } = await dropoutsAt(url, sines, 5));
    console.log(`  ${sines} sines: ${dropouts} dropouts`);
    if (dropouts > 0) break;
    good = sines;
  }
  return good;
}

const what = process.argv[2] ?? 'all';
const { proc, url } = await startServer();
const pid = /** @type {number} */ (proc.pid);
try {
  if (what === 'cpu' || what === 'all') {
    console.log('threads\' CPU, no page open:', await cpuShare(pid, 10));
    const p = await openPage(url);
    await new Promise((r) => setTimeout(r, 2000));
    console.log('threads\' CPU, one page streaming:', await cpuShare(pid, 10));
    await p.close();
  }
  if (what === 'capacity' || what === 'all') {
    console.log('capacity, page closed:');
    const closed = await capacity(url);
    const p = await openPage(url);
    // Let the browser finish starting: its start-up is not what is being measured.
    await new Promise((r) => setTimeout(r, 3000));
    console.log('capacity, page open and drawing:');
    const open = await capacity(url);
    await p.close();
    console.log(`largest sines without dropouts in 5 s: page closed ${closed}, page open ${open}`);
  }
} finally {
  proc.kill('SIGINT');
}
