/** Levenshtein distance, two rows at a time. */
export function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      row[j] = Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + cost);
    }
    prev = row;
  }
  return prev[b.length]!;
}

/**
 * The candidate nearest to `name` (the first of equals), or null when none is within
 * `maxDistance` edits: the "did you mean" of a name typed by hand.
 */
export function nearest(name: string, candidates: Iterable<string>, maxDistance = 2): string | null {
  let best: string | null = null;
  let bestDistance = maxDistance + 1;
  for (const candidate of candidates) {
    // Lengths further apart than the bound cannot be within it.
    if (Math.abs(candidate.length - name.length) >= bestDistance) continue;
    const d = editDistance(name, candidate);
    if (d < bestDistance) {
      best = candidate;
      bestDistance = d;
    }
  }
  return best;
}
