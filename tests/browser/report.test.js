// Browser test of `xrunlab report`: the real binary writes run and experiment results and a report page, Debian's chromium opens it from a file:// URL with no network, and every result kind's charts are checked to draw data; runs in node's test runner.
// @ts-check

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { ARTIFACTS, BIN, launch } from './harness.js';

/** Result files to draw: one command per kind, each as short as it can run. */
const RUNS = {
  run: ['run', '--duration', '1s'],
  'probe.wakeup': ['probe', 'wakeup', '--quick'],
  'probe.sleep': ['probe', 'sleep', '--quick', '--intervals', '100us,1ms', '--per-point', '50ms'],
  'probe.placement': ['probe', 'placement', '--quick', '--threads', '2', '--work', '3000000'],
  'sweep.threads': ['sweep', 'threads', '--quick', '--max-threads', '2', '--per-point', '50ms'],
  'sweep.buffer': ['sweep', 'buffer', '--quick', '--buffers', '64,512', '--per-point', '200ms'],
  capacity: ['capacity', '--quick', '--buffers', '256', '--seconds', '200ms', '--repeats', '1', '--latency-sines', '50'],
};

test('the report draws every result kind from a file:// page without the network', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'xrunlab-report-'));
  const files = Object.entries(RUNS).map(([kind, args]) => {
    const file = join(dir, `${kind}.json`);
    execFileSync(BIN, [...args, '--json', file], { stdio: ['ignore', 'ignore', 'pipe'] });
    return file;
  });
  const out = join(dir, 'report.html');
  execFileSync(BIN, ['report', ...files, '--out', out]);
  const html = readFileSync(out, 'utf8');
  assert.doesNotMatch(html, /(src|href)=["']?https?:/, 'the page loads nothing by URL');

  const { context, close } = await launch();
  try {
    const page = await context.newPage();
    /** @type {string[]} */
    const errors = [];
    /** @type {string[]} */
    const requests = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    page.on('console', (m) => m.type() === 'error' && errors.push(m.text()));
    page.on('request', (r) => requests.push(r.url()));
    await page.goto(pathToFileURL(out).href);
    await page.waitForSelector('body[data-drawn]', { timeout: 30000 });
    await page.screenshot({ path: join(ARTIFACTS, 'report.png'), fullPage: true });
    assert.deepEqual(errors, [], 'no script errors');
    const remote = requests.filter((u) => !u.startsWith('file:') && !u.startsWith('blob:'));
    assert.deepEqual(remote, [], 'no request leaves the machine');

    // Data pixels inside each chart's plot area: saturated colours, or the driver's pure black
    // (axes and text are grey and #222, the background white; legends sit outside the plot area).
    const charts = await page.$$eval('canvas', (canvases) =>
      canvases.map((c) => {
        const ctx = /** @type {CanvasRenderingContext2D} */ (c.getContext('2d'));
        const dpr = c.width / c.clientWidth;
        const x0 = Math.round(66 * dpr);
        const y0 = Math.round(14 * dpr);
        const w = c.width - Math.round(150 * dpr) - x0;
        const h = c.height - Math.round(44 * dpr) - y0;
        const px = ctx.getImageData(x0, y0, w, h).data;
        let data = 0;
        for (let i = 0; i < px.length; i += 4) {
          const [r, g, b] = [px[i], px[i + 1], px[i + 2]];
          if (Math.max(r, g, b) - Math.min(r, g, b) > 40 || (r === 0 && g === 0 && b === 0)) data++;
        }
        return { kind: c.dataset.kind ?? '', title: c.parentElement?.querySelector('figcaption')?.textContent ?? '', data };
      }),
    );
    for (const kind of Object.keys(RUNS)) {
      const mine = charts.filter((c) => c.kind === kind);
      assert.ok(mine.length > 0, `${kind} has charts: ${JSON.stringify(charts)}`);
      for (const c of mine) {
        // A dropout chart of a clean run is rightly empty.
        if (c.title.startsWith('Dropouts')) continue;
        assert.ok(c.data > 20, `${kind} "${c.title}" draws data (${c.data} pixels)`);
      }
    }
  } finally {
    await close();
  }
});
