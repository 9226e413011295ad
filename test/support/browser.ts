import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type BrowserContext, chromium } from 'playwright-core';

/** The distribution's Chromium (Debian package `chromium`): never a browser downloaded for the tests. */
export const CHROMIUM = '/usr/bin/chromium';

/** Quiet, offline, headless: no sandbox (tests may run as root), no GPU, nothing phoning home. */
const FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export interface Browser {
  context: BrowserContext;
  /** Ends the browser and removes its profile. */
  close(): Promise<void>;
}

/** Starts headless Chromium with a profile of its own in a temporary directory. */
export async function launchChromium(): Promise<Browser> {
  const profile = mkdtempSync(join(tmpdir(), 'feedsync-chromium-'));
  try {
    const context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: FLAGS,
      viewport: { width: 1280, height: 900 },
      timeout: 60_000,
    });
    return {
      context,
      close: async () => {
        await context.close();
        rmSync(profile, { recursive: true, force: true });
      },
    };
  } catch (err) {
    rmSync(profile, { recursive: true, force: true });
    throw new Error(`cannot start ${CHROMIUM} (apt-get install -y chromium): ${(err as Error).message}`, {
      cause: err,
    });
  }
}
