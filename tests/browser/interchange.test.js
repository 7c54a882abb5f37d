// Interchange test: a histogram written by xrunlab (HdrHistogram V2 compressed, base64) read
// back by a second implementation, the npm hdr-histogram-js package: the real binary writes a
// run result and an A/B's run results, and every histogram in them decodes to the count, p50,
// p99 and maximum the Rust side put in the same file's summary; runs in node's test runner.
// @ts-check

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as hdr from 'hdr-histogram-js';
import { BIN } from './harness.js';

/** The histograms a run result keeps, each named as its summary figures are. */
const SERIES = ['load_pct', 'driver_wake_latency_us', 'worker_wake_latency_us'];

/**
 * Checks one run result's histograms against its summary. The summary's percentiles are the
 * Rust histogram's (the bucket's highest value, in 1/1000 of the unit), capped at the exact
 * maximum; the maximum itself is exact, so the decoded one may lie up to one bucket
 * (3 significant digits) above it.
 * @param {string} file
 */
function checkRun(file) {
  const run = JSON.parse(readFileSync(file, 'utf8'));
  for (const name of SERIES) {
    const encoded = run.histograms[name];
    const figures = run.summary[name];
    assert.equal(encoded.encoding, 'HdrHistogram V2 compressed, base64');
    assert.equal(encoded.units_per_value, 1000);
    const h = hdr.decodeFromCompressedBase64(encoded.data, 64, false);
    const where = `${file} ${name}`;
    assert.ok(figures.count > 0, `${where}: a run records every buffer`);
    assert.equal(h.totalCount, figures.count, `${where}: count`);
    for (const [q, key] of [[50, 'p50'], [99, 'p99'], [99.9, 'p999']]) {
      const value = Math.min(h.getValueAtPercentile(Number(q)) / 1000, figures.max);
      assert.ok(Math.abs(value - figures[key]) < 1e-9, `${where}: ${key} ${value} vs ${figures[key]}`);
    }
    const max = h.maxValue / 1000;
    assert.ok(max >= figures.max - 0.001 && max <= figures.max * 1.001 + 0.001,
      `${where}: max ${max} vs ${figures.max}`);
    h.destroy();
  }
}

test('hdr-histogram-js reads the histograms of run and ab results as the Rust side wrote them', () => {
  const dir = mkdtempSync(join(tmpdir(), 'xrunlab-interchange-'));
  const file = join(dir, 'run.json');
  execFileSync(BIN, ['run', '--quiet', '--duration', '1s', '--json', file], { stdio: 'ignore' });
  checkRun(file);
  const runs = join(dir, 'ab');
  const compare = join(dir, 'compare.json');
  execFileSync(BIN, ['ab', '--quiet', '--a', '', '--b', '--buffer 256', '--rounds', '1',
    '--duration', '500ms', '--dir', runs, '--json', compare], { stdio: 'ignore' });
  checkRun(join(runs, 'a-1.json'));
  checkRun(join(runs, 'b-1.json'));
  // The compare result's merged distributions decode too, and hold every buffer of a side.
  const merged = JSON.parse(readFileSync(compare, 'utf8')).distributions;
  const b = JSON.parse(readFileSync(join(runs, 'b-1.json'), 'utf8'));
  assert.equal(merged[0].name, 'load');
  const load = hdr.decodeFromCompressedBase64(merged[0].b.data, 64, false);
  assert.equal(load.totalCount, b.summary.load_pct.count);
});
