import { afterAll, describe, expect, it } from 'vitest';
import { takeLease } from '../../src/store/lease.js';
import { testEnv } from '../support/config.js';
import { killChildren, runCli } from '../support/processes.js';
import { useSandboxes } from './harness.js';

const sandbox = useSandboxes();
afterAll(killChildren);

// Never reached: every command here finds the source leased first.
const NO_FEED = 'http://127.0.0.1:1/api';

describe('a source whose lease a killed run still holds', () => {
  it('sync --once names the holder and when its lease runs out; cursor reset says what it waits for', async () => {
    const box = await sandbox('lease_held');
    // What a run killed with SIGKILL leaves: a lease row held, not renewed, a minute to run.
    const stale = await takeLease(box.store, 'default', { holder: 'gone-host/4242', leaseMs: 60_000 });
    expect(stale).not.toBeNull();
    const env = testEnv({ schema: box.schema, prefix: box.prefix, baseUrl: NO_FEED }, { LOG_LEVEL: 'info' });

    const once = await runCli(['sync', '--once'], env);
    expect(once.code, once.stderr).toBe(0);
    const line = once.stdout
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map(
        (l) => JSON.parse(l) as { outcome?: string; msg: string; holder?: string; leaseExpiresAt?: string },
      )
      .find((l) => l.outcome === 'held-elsewhere');
    expect(line).toMatchObject({ holder: 'gone-host/4242', leaseExpiresAt: expect.any(String) });
    // Each line names its source once, and no field holds a value that was never there.
    for (const raw of once.stdout.split('\n').filter((l) => l.startsWith('{'))) {
      expect(raw.match(/"source":/g)?.length ?? 0, raw).toBeLessThanOrEqual(1);
      expect(raw, raw).not.toContain('"undefined"');
    }
    expect(line?.msg).toContain(
      `gone-host/4242 holds the lease of this source until ${line?.leaseExpiresAt}`,
    );
    const left = Date.parse(line?.leaseExpiresAt ?? '') - Date.now();
    expect(left).toBeGreaterThan(0);
    expect(left).toBeLessThanOrEqual(60_000);

    // A cursor command waits up to SOURCE_LEASE_MS for the turn to end, and says so first.
    const reset = await runCli(['cursor', 'reset'], { ...env, SOURCE_LEASE_MS: '1000' });
    expect(reset.code).toBe(1);
    const [waiting, failure] = reset.stderr.trim().split('\n');
    expect(waiting).toMatch(
      /^feedsync: source default is being synced by gone-host\/4242 \(its lease runs to .*\); waiting up to 1 s for its turn to end$/,
    );
    expect(failure).toContain('the cursor was not moved');
    await stale?.release();
  }, 60_000);
});
