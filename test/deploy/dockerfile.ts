/** One Dockerfile instruction, continuation lines joined. */
export interface Instruction {
  /** Upper-case keyword: FROM, RUN, COPY, ... */
  keyword: string;
  /** Everything after the keyword, as written. */
  args: string;
  /** 1-based line where the instruction starts. */
  line: number;
}

/** One build stage: its FROM and what follows up to the next FROM. */
export interface Stage {
  image: string;
  name: string | null;
  instructions: Instruction[];
}

/**
 * Splits a Dockerfile into stages. Knows comments, parser directives, blank lines
 * and backslash continuations; heredocs and a changed escape character are not used
 * by our Dockerfile and not supported. Instructions before the first FROM (global
 * ARGs) are dropped.
 */
export function parseDockerfile(text: string): Stage[] {
  const stages: Stage[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const start = i;
    let logical = lines[i]!;
    if (/^\s*(#|$)/.test(logical)) continue;
    while (logical.trimEnd().endsWith('\\') && i + 1 < lines.length) {
      i++;
      const next = lines[i]!;
      if (/^\s*#/.test(next)) continue;
      logical = `${logical.trimEnd().slice(0, -1)} ${next.trim()}`;
    }
    const match = /^\s*(\w+)\s*(.*)$/.exec(logical);
    if (!match) throw new Error(`Dockerfile line ${start + 1}: cannot read "${logical}"`);
    const instruction = { keyword: match[1]!.toUpperCase(), args: match[2]!.trim(), line: start + 1 };
    if (instruction.keyword === 'FROM') {
      const [image = '', as, name] = instruction.args.replace(/--\S+\s+/g, '').split(/\s+/);
      stages.push({ image, name: as?.toUpperCase() === 'AS' ? (name ?? null) : null, instructions: [] });
    } else {
      stages.at(-1)?.instructions.push(instruction);
    }
  }
  return stages;
}

/** The arguments of an exec-form (JSON array) instruction, or null for the shell form. */
export function execForm(args: string): string[] | null {
  if (!args.startsWith('[')) return null;
  const parsed = JSON.parse(args) as unknown;
  return Array.isArray(parsed) && parsed.every((a) => typeof a === 'string') ? parsed : null;
}

/** `KEY=value` pairs of an ENV or ARG instruction (also the legacy `ENV KEY value`). */
export function assignments(args: string): Array<[string, string]> {
  if (!args.includes('=')) {
    const [key = '', ...value] = args.split(/\s+/);
    return [[key, value.join(' ')]];
  }
  return [...args.matchAll(/([A-Za-z_][A-Za-z0-9_]*)(?:=("[^"]*"|'[^']*'|\S*))?/g)].map((m) => [
    m[1]!,
    (m[2] ?? '').replace(/^["']|["']$/g, ''),
  ]);
}

/** Whether a path (relative, `/`-separated) is left out of the build context by .dockerignore. */
export function isIgnored(patterns: readonly string[], path: string): boolean {
  let ignored = false;
  for (const raw of patterns) {
    const negated = raw.startsWith('!');
    const pattern = (negated ? raw.slice(1) : raw).replace(/^\/+|\/+$/g, '');
    // As Docker does: a pattern matches the path itself or any folder above it.
    if (globToRegExp(pattern).test(path)) ignored = !negated;
  }
  return ignored;
}

/** .dockerignore patterns, comments and blank lines removed. */
export function dockerignorePatterns(text: string): string[] {
  return text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'));
}

function globToRegExp(pattern: string): RegExp {
  let source = '';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!;
    if (c === '*' && pattern[i + 1] === '*') {
      source += '.*';
      i++;
      if (pattern[i + 1] === '/') i++;
    } else if (c === '*') source += '[^/]*';
    else if (c === '?') source += '[^/]';
    else source += c.replace(/[.+^${}()|[\]\\]/g, '\\$&');
  }
  return new RegExp(`^${source}(/.*)?$`);
}
