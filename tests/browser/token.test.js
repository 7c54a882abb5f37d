// Browser tests of the dashboard's access token: without it the page says where it is, the printed URL trades it for an HttpOnly SameSite=Strict cookie the scripts cannot read, and --no-token serves without one; the real binary and Debian's chromium, in node's test runner.
// @ts-check

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { ARTIFACTS, launch, startServer } from './harness.js';

/** @type {import('./harness.js').Server} */
let server;
/** @type {import('playwright-core').BrowserContext} */
let context;
/** @type {() => Promise<void>} */
let closeBrowser;

before(async () => {
  server = await startServer([]);
  ({ context, close: closeBrowser } = await launch());
});

after(async () => {
  await closeBrowser?.();
  server?.proc.kill('SIGINT');
});

test('the page without the token says it needs the token and where it is', async () => {
  const page = await context.newPage();
  const response = await page.goto(server.base);
  assert.equal(response?.status(), 401);
  const text = (await page.textContent('#needs-token')) ?? '';
  assert.match(text, /needs its token/);
  assert.ok(text.includes(`http://127.0.0.1:${server.port}/?token=`), text);
  assert.match(text, /--token/);
  assert.ok(!text.includes(/** @type {string} */ (server.token)), 'the page does not give the token away');
  assert.equal(await page.locator('#conn').count(), 0, 'no dashboard without the token');
  await page.screenshot({ path: join(ARTIFACTS, 'needs-token.png') });

  // A wrong token in the address: the same page, saying the token is wrong, and no cookie.
  const wrong = await page.goto(`${server.base}?token=${'0'.repeat(48)}`);
  assert.equal(wrong?.status(), 401);
  assert.match((await page.textContent('#needs-token')) ?? '', /not this dashboard's token/);
  assert.deepEqual(await context.cookies(server.base), []);
  await page.close();
});

test('the printed URL opens the dashboard and leaves an HttpOnly SameSite=Strict cookie', async () => {
  const page = await context.newPage();
  /** @type {string[]} */
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await page.goto(server.url);
  assert.equal(page.url(), server.base, 'the token left the address bar');
  // The WebSocket opens (with the cookie) and frames arrive.
  await page.waitForFunction(() => document.getElementById('conn')?.textContent === 'live');
  await page.waitForFunction(() => Number(document.getElementById('c-buffers')?.textContent) > 0);

  const cookies = await context.cookies(server.base);
  assert.equal(cookies.length, 1, JSON.stringify(cookies));
  const [cookie] = cookies;
  assert.equal(cookie.name, `xrunlab-token-${server.port}`);
  assert.equal(cookie.value, server.token);
  assert.equal(cookie.httpOnly, true);
  assert.equal(cookie.sameSite, 'Strict');
  assert.equal(await page.evaluate(() => document.cookie), '', "the page's scripts cannot read the token");

  // The page's own requests carry the cookie: a PUT and a POST go through.
  const put = page.waitForResponse((r) => r.url().endsWith('/api/config') && r.request().method() === 'PUT');
  await page.selectOption('#preset', 'optimal');
  assert.equal((await put).status(), 200);
  const burst = page.waitForResponse((r) => r.url().endsWith('/api/burst'));
  await page.click('#burst');
  assert.equal((await burst).status(), 200);
  // A reload (no token in the address now) still works on the cookie.
  const reloaded = await page.reload();
  assert.equal(reloaded?.status(), 200);
  await page.waitForFunction(() => document.getElementById('conn')?.textContent === 'live');
  assert.deepEqual(errors, []);
  await page.close();
});

test('with --no-token the dashboard opens without a token, after a warning', async () => {
  const open = await startServer(['--no-token']);
  try {
    assert.equal(open.token, null);
    assert.equal(open.url, open.base);
    // stderr is a separate pipe: its warning may arrive just after the URL line.
    for (let i = 0; i < 50 && !open.stderr().includes('warning'); i++) await new Promise((r) => setTimeout(r, 100));
    assert.match(open.stderr(), /warning: the dashboard takes no token \(--no-token\)/);
    const page = await context.newPage();
    const response = await page.goto(open.url);
    assert.equal(response?.status(), 200);
    await page.waitForFunction(() => document.getElementById('conn')?.textContent === 'live');
    // Cookies are per host, not per port: the other server's cookie is there, but none is set here.
    const names = (await context.cookies(open.base)).map((c) => c.name);
    assert.ok(!names.includes(`xrunlab-token-${open.port}`), names.join(', '));
    await page.close();
  } finally {
    open.proc.kill('SIGINT');
  }
});
