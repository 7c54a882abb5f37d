// What the browser tests and measure.js share: starting the real xrunlab binary and reading the URL (with its access token) that it prints, and launching Debian's chromium; runs in node.
// @ts-check

import { spawn } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const here = dirname(fileURLToPath(import.meta.url));
export const BIN = process.env.XRUNLAB_BIN ?? join(here, '../../target/debug/xrunlab');
export const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
export const ARTIFACTS = join(here, 'artifacts');
mkdirSync(ARTIFACTS, { recursive: true });

/**
 * A running xrunlab dashboard.
 * @typedef {object} Server
 * @property {import('node:child_process').ChildProcess} proc
 * @property {string} url the URL it printed: `base` plus `?token=…` unless started with --no-token
 * @property {string} base `http://127.0.0.1:PORT/`
 * @property {number} port
 * @property {string | null} token
 * @property {() => string} stderr what it has written to stderr so far
 */

/**
 * Starts the binary on a free port and resolves once it prints its URL line.
 * @param {string[]} args
 * @returns {Promise<Server>}
 */
export function startServer(args) {
  return new Promise((resolve, reject) => {
    const env = { ...process.env };
    delete env.XRUNLAB_TOKEN;
    const proc = spawn(BIN, ['--port', '0', ...args], { stdio: ['ignore', 'pipe', 'pipe'], env });
    let out = '';
    let err = '';
    const timer = setTimeout(() => reject(new Error(`no URL line within 60 s; stdout: ${out}; stderr: ${err}`)), 60000);
    proc.stdout?.on('data', (d) => {
      out += String(d);
      const m = /^xrunlab dashboard: ((http:\/\/127\.0\.0\.1:(\d+)\/)(?:\?token=([A-Za-z0-9._~-]+))?)$/m.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve({ proc, url: m[1], base: m[2], port: Number(m[3]), token: m[4] ?? null, stderr: () => err });
      }
    });
    proc.stderr?.on('data', (d) => (err += String(d)));
    proc.on('exit', (code) => reject(new Error(`xrunlab exited with ${code}: ${err}`)));
  });
}

/**
 * Headless chromium with a fresh profile (so no cookie from an earlier run).
 * @param {string[]} [extraArgs]
 */
export async function launch(extraArgs = []) {
  const userData = mkdtempSync(join(tmpdir(), 'xrunlab-chromium-'));
  const context = await chromium.launchPersistentContext(userData, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
      ...extraArgs,
    ],
    viewport: { width: 1400, height: 1000 },
  });
  return {
    context,
    close: async () => {
      await context.close();
      rmSync(userData, { recursive: true, force: true });
    },
  };
}

/**
 * @typedef {object} OpenDashboard
 * @property {Server} server
 * @property {import('playwright-core').BrowserContext} context
 * @property {import('playwright-core').Page} page the printed URL, loaded and live
 * @property {string[]} pageErrors uncaught errors of the page, collected as they happen
 * @property {() => Promise<void>} close closes the browser and stops the server
 */

/**
 * Starts the binary with `args`, opens its printed URL (token included) in a fresh headless
 * chromium and waits until the page's connection is live.
 * @param {string[]} args
 * @param {string[]} [browserArgs]
 * @returns {Promise<OpenDashboard>}
 */
export async function openDashboard(args, browserArgs = []) {
  const server = await startServer(args);
  const { context, close } = await launch(browserArgs);
  const page = await context.newPage();
  /** @type {string[]} */
  const pageErrors = [];
  page.on('pageerror', (e) => pageErrors.push(e.message));
  await page.goto(server.url);
  await page.waitForFunction(() => document.getElementById('conn')?.textContent === 'live');
  return {
    server,
    context,
    page,
    pageErrors,
    close: async () => {
      await close();
      server.proc.kill('SIGINT');
    },
  };
}
