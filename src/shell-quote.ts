/**
 * One word for a POSIX shell, so that a command we suggest in a message can be
 * pasted as it is, whatever the source name holds (spaces, quotes, `$`, `;`).
 */
export function shellQuote(word: string): string {
  if (/^[A-Za-z0-9_@%+=:,./-]+$/.test(word)) return word;
  return `'${word.replace(/'/g, `'\\''`)}'`;
}
