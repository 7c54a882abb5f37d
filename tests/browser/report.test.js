// Browser test of `xrunlab report`: the real binary writes run, experiment and compare results and a report page, Debian's chromium opens it from a file:// URL with no network, and every result kind's charts are checked to draw data (a compare result's CCDFs, change bars and fingerprint diff against its file); runs in node's test runner.
// @ts-check

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
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

    // Each experiment's kept distributions (HdrHistograms): one CCDF per family, a line per
    // point or thread of the file.
    /** @type {Record<string, (r: any) => number>} */
    const lines = {
      'probe.wakeup': (r) => r.result.threads.length,
      'probe.sleep': (r) => r.result.points.length,
      'probe.placement': (r) => r.result.threads.length,
      'sweep.threads': (r) => r.result.points.length,
      'sweep.buffer': (r) => r.result.points.length,
      capacity: (r) => r.result.points.filter((/** @type {any} */ p) => p.histograms).length,
    };
    const ccdfs = await page.$$eval('canvas[data-series]', (cs) =>
      cs.map((c) => ({ kind: c.dataset.kind ?? '', series: Number(c.dataset.series) })),
    );
    Object.keys(RUNS).forEach((kind, i) => {
      const count = lines[kind];
      if (!count) return;
      const expected = count(JSON.parse(readFileSync(files[i], 'utf8')));
      const mine = ccdfs.filter((c) => c.kind === kind);
      assert.ok(mine.length > 0, `${kind} draws its distributions: ${JSON.stringify(ccdfs)}`);
      for (const c of mine) assert.equal(c.series, expected, `${kind}: a line per point or thread`);
    });
  } finally {
    await close();
  }
});

/**
 * Runs the binary and returns its exit status and stderr.
 * @param {string[]} args
 */
function status(args) {
  const r = spawnSync(BIN, args, { encoding: 'utf8' });
  return { code: r.status, stderr: r.stderr };
}

test('the report draws a compare result: both sides as CCDFs, the change bars, the fingerprint diff', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'xrunlab-report-compare-'));
  const a = join(dir, 'a.json');
  const b = join(dir, 'b.json');
  for (const f of [a, b]) execFileSync(BIN, ['run', '--quiet', '--duration', '1s', '--json', f], { stdio: 'ignore' });
  // One machine cannot make two kernels: B's fingerprint says another, so the diff has a line.
  const bRun = JSON.parse(readFileSync(b, 'utf8'));
  const kernelA = JSON.parse(readFileSync(a, 'utf8')).fingerprint.kernel_release;
  bRun.fingerprint.kernel_release = '6.18.0-report-test';
  writeFileSync(b, JSON.stringify(bRun));
  const cmp = join(dir, 'compare.json');
  execFileSync(BIN, ['compare', a, '--vs', b, '--json', cmp], { stdio: 'ignore' });
  // And an A/B of two buffer sizes: the workloads differ, which the page lists too.
  const ab = join(dir, 'ab.json');
  execFileSync(BIN, ['ab', '--quiet', '--a', '', '--b', '--buffer 256', '--rounds', '1', '--duration', '500ms', '--dir', join(dir, 'ab'), '--json', ab], { stdio: 'ignore' });
  const out = join(dir, 'report.html');
  execFileSync(BIN, ['report', cmp, ab, '--out', out], { stdio: 'ignore' });

  const { context, close } = await launch();
  try {
    const page = await context.newPage();
    /** @type {string[]} */
    const errors = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    page.on('console', (m) => m.type() === 'error' && errors.push(m.text()));
    await page.goto(pathToFileURL(out).href);
    await page.waitForSelector('body[data-drawn]', { timeout: 30000 });
    await page.screenshot({ path: join(ARTIFACTS, 'report-compare.png'), fullPage: true });
    assert.deepEqual(errors, [], 'no script errors');
    for (const file of [cmp, ab]) {
      const result = JSON.parse(readFileSync(file, 'utf8'));
      const drawn = await page.$eval(`section[data-file="${file}"]`, (sec) => ({
        ccdf: [...sec.querySelectorAll('canvas[data-series]')].map((c) => {
          const cv = /** @type {HTMLCanvasElement} */ (c);
          const ctx = /** @type {CanvasRenderingContext2D} */ (cv.getContext('2d'));
          const px = ctx.getImageData(0, 0, cv.width, cv.height).data;
          let coloured = 0;
          for (let i = 0; i < px.length; i += 4) if (Math.max(px[i], px[i + 1], px[i + 2]) - Math.min(px[i], px[i + 1], px[i + 2]) > 40) coloured++;
          return { series: Number(cv.dataset.series), title: cv.parentElement?.querySelector('figcaption')?.textContent ?? '', coloured };
        }),
        bars: [...sec.querySelectorAll('canvas[data-bars]')].map((c) => Number(/** @type {HTMLCanvasElement} */ (c).dataset.bars)),
        fingerprint: [...sec.querySelectorAll('.fingerprint-diff')].map((e) => e.textContent),
        fingerprintItems: [...sec.querySelectorAll('ul.fingerprint-diff li')].map((e) => e.textContent),
        workload: [...sec.querySelectorAll('ul.workload-diff li')].map((e) => e.textContent),
      }));
      assert.equal(drawn.ccdf.length, result.distributions.length, `${file}: one CCDF per distribution`);
      result.distributions.forEach((/** @type {any} */ d, /** @type {number} */ i) => {
        assert.ok(drawn.ccdf[i].title.startsWith(d.name), `${file}: ${drawn.ccdf[i].title}`);
        assert.equal(drawn.ccdf[i].series, 2, `${file} ${d.name}: both sides drawn`);
        assert.ok(drawn.ccdf[i].coloured > 100, `${file} ${d.name}: lines drawn (${drawn.ccdf[i].coloured} pixels)`);
      });
      const withChange = result.metrics.filter((/** @type {any} */ m) => m.change_pct !== null).length;
      assert.ok(withChange >= 3, `${file}: load metrics have a change`);
      assert.deepEqual(drawn.bars, [withChange], `${file}: one bar per metric with a change`);
      const expected = result.fingerprint_diff.map((/** @type {any} */ c) => `${c.field}: ${c.a.join(' / ')} → ${c.b.join(' / ')}`);
      if (file === cmp) {
        assert.ok(drawn.fingerprintItems.includes(`kernel_release: ${kernelA} → 6.18.0-report-test`), JSON.stringify(drawn.fingerprintItems));
        assert.deepEqual(drawn.fingerprintItems, expected);
      } else {
        assert.deepEqual(drawn.fingerprintItems, expected);
        if (expected.length === 0) assert.deepEqual(drawn.fingerprint, ['nothing in the machine fingerprints']);
        assert.ok(drawn.workload.some((t) => t.startsWith('buffer')), `the buffer sizes differ: ${JSON.stringify(drawn.workload)}`);
      }
    }
  } finally {
    await close();
  }

  // A compare file is read as its type: another schema, or a field that does not fit, is
  // refused with exit 2 naming the file and the field.
  const bad = JSON.parse(readFileSync(cmp, 'utf8'));
  bad.metrics[0].verdict = 'maybe';
  const badFile = join(dir, 'bad.json');
  writeFileSync(badFile, JSON.stringify(bad));
  let r = status(['report', badFile, '--out', join(dir, 'bad.html')]);
  assert.equal(r.code, 2, r.stderr);
  assert.match(r.stderr, /bad\.json: field metrics\[0\]\.verdict/);
  bad.metrics[0].verdict = 'better';
  bad.schema = 'xrunlab.compare/9';
  writeFileSync(badFile, JSON.stringify(bad));
  r = status(['report', badFile, '--out', join(dir, 'bad.html')]);
  assert.equal(r.code, 2, r.stderr);
  assert.match(r.stderr, /bad\.json: field schema/);
});
