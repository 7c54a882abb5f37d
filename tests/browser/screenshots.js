// The README's pictures (not a test): the dashboard, a blame card that names a real SCHED_FIFO hog, and the History view on the fixture's history, taken from the real binary in Debian's headless chromium. Needs root (kernel tracepoints, SCHED_FIFO). Runs in node.
// @ts-check
//
//   node screenshots.js [OUT_DIR] [PICTURES]   (default docs/src/images and all of
//   dashboard,blame-card,history; XRUNLAB_BIN overrides target/debug/xrunlab,
//   XRUNLAB_HISTORY_FIXTURE target/debug/examples/history_fixture)

import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { openDashboard } from './harness.js';

const here = dirname(fileURLToPath(import.meta.url));
const out = process.argv[2] ?? join(here, '../../docs/src/images');
const pictures = (process.argv[3] ?? 'dashboard,blame-card,history').split(',');

// The README's hog: SCHED_FIFO 90 on CPU 1, above the audio thread, spinning 20 ms.
const HOG = `
import ctypes, os, time
ctypes.CDLL(None).prctl(15, b"xrl-hog", 0, 0, 0)
os.sched_setaffinity(0, {1})
os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(90))
end = time.monotonic() + 0.020
while time.monotonic() < end:
    pass
time.sleep(0.3)
`;

/** Runs the hog once and resolves when it has exited. */
function hog() {
  return new Promise((resolve, reject) => {
    const p = spawn('python3', ['-c', HOG], { stdio: 'inherit' });
    p.on('exit', (code) => (code === 0 ? resolve(undefined) : reject(new Error(`hog exited with ${code}`))));
  });
}

if (process.getuid?.() !== 0) throw new Error('needs root: kernel tracepoints and SCHED_FIFO');

// The History view: the fixture's last hour, one card open.
if (pictures.includes('history')) {
  const fixture = process.env.XRUNLAB_HISTORY_FIXTURE ?? join(here, '../../target/debug/examples/history_fixture');
  const dir = mkdtempSync(join(tmpdir(), 'xrunlab-shots-'));
  const db = join(dir, 'history.db');
  execFileSync(fixture, [db]);
  const { page, close } = await openDashboard(['--history', db, '--sines', '300']);
  try {
    await page.check('[data-testid="show-history"]');
    await page.selectOption('[data-testid="history-span"]', '1h');
    await page.waitForSelector('#history-list tbody tr[data-id="6"]');
    await page.click('#history-list tbody tr[data-id="6"]');
    await page.locator('[data-testid="history-card"] [data-testid="verdict"]').waitFor();
    await page.locator('#history-panel').screenshot({ path: join(out, 'history.png') });
  } finally {
    await close();
    rmSync(dir, { recursive: true, force: true });
  }
}

// The dashboard as it starts: the default engine, a few seconds of charts, one burst.
if (pictures.includes('dashboard')) {
  const { page, close } = await openDashboard([]);
  try {
    await page.waitForTimeout(2500);
    await page.click('#burst');
    await page.waitForTimeout(2000);
    await page.click('#freeze');
    await page.screenshot({ path: join(out, 'dashboard.png') });
  } finally {
    await close();
  }
}

// A blame card: the README's hog run three times beside one audio thread pinned to CPU 1.
if (!pictures.includes('blame-card')) process.exit(0);
const { server, page, close } = await openDashboard(['--explain', '--cpus', '1', '--pin', '--threads', '1', '--sines', '300']);
try {
  /** @param {string} path */
  const api = async (path) => {
    const r = await fetch(new URL(path, server.base), { headers: { authorization: `Bearer ${server.token}` } });
    return r.json();
  };
  await page.waitForTimeout(1500);
  for (let i = 0; i < 3; i++) {
    await hog();
    await page.waitForTimeout(400);
  }
  await page.waitForTimeout(500);
  // The cards that name the hog, the latest buffer first (the hog's 20 ms spin rather than
  // its exit: cards are listed oldest first, and the spin makes the latest of each pair).
  const hogSeqs = (await api('/api/explain')).recent
    .filter((/** @type {{verdict: string}} */ d) => d.verdict.includes('xrl-hog'))
    .sort((/** @type {{late_by_us: number}} */ a, /** @type {{late_by_us: number}} */ b) => b.late_by_us - a.late_by_us)
    .map((/** @type {{seq: number}} */ d) => d.seq);
  if (hogSeqs.length === 0) throw new Error('no card names the hog');
  await page.click('#freeze');
  const at = await page.evaluate((seqs) => {
    const x = /** @type {any} */ (window).xrunlab;
    const chart = x.charts.load;
    // The latest-running card whose mark is on the visible chart.
    const visible = x.explain.marks.filter((/** @type {{t: number}} */ m) => m.t > chart.edge - chart.windowMs + 100);
    const seq = seqs.find((/** @type {number} */ s) => visible.some((/** @type {{seq: number}} */ m) => m.seq === s));
    const m = visible.find((/** @type {{seq: number}} */ m) => m.seq === seq);
    if (!m) return null;
    const r = chart.canvas.getBoundingClientRect();
    return { x: r.right - ((chart.edge - m.t) / chart.windowMs) * r.width, y: r.top + r.height / 2 };
  }, hogSeqs);
  if (!at) throw new Error('the hog card has no mark on the chart');
  await page.mouse.click(at.x, at.y);
  await page.locator('[data-testid="verdict"]').waitFor({ timeout: 5000 });
  await page.locator('#explain-panel').screenshot({ path: join(out, 'blame-card.png') });
  console.log(`wrote the pictures ${pictures.join(', ')} in ${out}`);
} finally {
  await close();
}
