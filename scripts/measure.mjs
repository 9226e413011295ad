// Prints the size figures of src/: files, median file lines, the longest functions and how
// many functions run over 100 lines. It only measures; nothing fails on a figure.
// Usage: node scripts/measure.mjs
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import ts from 'typescript';

const say = (line) => process.stdout.write(`${line}\n`);
const root = join(import.meta.dirname, '..');
const LONG = 100;

function sourceFiles(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return /\.(ts|mts)$/.test(entry.name) ? [path] : [];
  });
}

function functionName(node) {
  if (node.name) return node.name.getText();
  const parent = node.parent;
  if (parent && (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent))) {
    return parent.name.getText();
  }
  return '(anonymous)';
}

const files = sourceFiles(join(root, 'src'));
const lineCounts = [];
const functions = [];
for (const path of files) {
  const text = readFileSync(path, 'utf8');
  lineCounts.push(text.split('\n').length - (text.endsWith('\n') ? 1 : 0));
  const source = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true);
  const visit = (node) => {
    if (ts.isFunctionLike(node) && 'body' in node && node.body) {
      const start = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
      const end = source.getLineAndCharacterOfPosition(node.getEnd()).line;
      functions.push({
        name: functionName(node),
        where: `${relative(root, path)}:${start + 1}`,
        lines: end - start + 1,
      });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
}

lineCounts.sort((a, b) => a - b);
const middle = lineCounts.length >> 1;
const median = lineCounts.length % 2 ? lineCounts[middle] : (lineCounts[middle - 1] + lineCounts[middle]) / 2;
functions.sort((a, b) => b.lines - a.lines);
const long = functions.filter((f) => f.lines > LONG);

say(`files in src/: ${files.length}`);
say(`lines in src/: ${lineCounts.reduce((a, b) => a + b, 0)}`);
say(`median file: ${median} lines`);
say(`longest function: ${functions[0]?.name} ${functions[0]?.lines} lines (${functions[0]?.where})`);
say(`functions over ${LONG} lines: ${long.length}`);
for (const f of long) say(`  ${f.lines}\t${f.name}\t${f.where}`);
