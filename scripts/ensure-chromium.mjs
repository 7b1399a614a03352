#!/usr/bin/env node
// The browser tests drive Debian's Chromium (never a browser downloaded by Playwright). `npm test`
// runs this first: it finds Chromium, or installs Debian's package when it can (root with apt-get),
// or stops with one line saying what to run.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';

const path = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
if (existsSync(path)) process.exit(0);

const hasApt = spawnSync('sh', ['-c', 'command -v apt-get'], { stdio: 'ignore' }).status === 0;
const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
if (process.env.CHROMIUM_PATH || !hasApt || !isRoot) {
  const how = process.env.CHROMIUM_PATH ? `CHROMIUM_PATH=${path} does not exist` : `no Chromium at ${path}`;
  console.error(`atomem tests: ${how}. Install Debian's chromium (sudo apt-get install -y chromium) or set CHROMIUM_PATH to a Chromium binary.`);
  process.exit(1);
}
console.error(`atomem tests: no Chromium at ${path}; installing Debian's chromium package (apt-get install -y chromium)…`);
const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
try {
  execFileSync('apt-get', ['update', '-qq'], { stdio: ['ignore', 'ignore', 'inherit'], env });
  execFileSync('apt-get', ['install', '-y', '-qq', 'chromium'], { stdio: ['ignore', 'ignore', 'inherit'], env });
} catch {
  console.error('atomem tests: installing chromium failed; run: sudo apt-get install -y chromium');
  process.exit(1);
}
if (!existsSync(path)) {
  console.error(`atomem tests: chromium installed but ${path} is missing; set CHROMIUM_PATH`);
  process.exit(1);
}
