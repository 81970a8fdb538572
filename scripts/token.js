// `npm run token`: mints from the compiled script, compiling first only when a source is newer than it, so a token
// takes about a second instead of a whole build.
'use strict';
const { execFileSync } = require('node:child_process');
const { existsSync, readdirSync, statSync } = require('node:fs');
const { join } = require('node:path');

const root = join(__dirname, '..');
const compiled = join(root, 'dist', 'scripts', 'mint-token.js');

function newestIn(path) {
  const stat = statSync(path);
  if (!stat.isDirectory()) return stat.mtimeMs;
  return readdirSync(path).reduce((newest, entry) => Math.max(newest, newestIn(join(path, entry))), stat.mtimeMs);
}

const sources = [join(root, 'src'), join(root, 'scripts', 'mint-token.ts'), join(root, 'package-lock.json')];
if (!existsSync(compiled) || sources.some((source) => newestIn(source) > statSync(compiled).mtimeMs)) {
  process.stderr.write('compiling the broker first (its sources changed since the last build)\n');
  try {
    execFileSync('npm', ['run', 'build', '--silent'], { cwd: root, stdio: ['ignore', 'inherit', 'inherit'] });
  } catch (error) {
    process.exit(error.status ?? 1);
  }
}
require(compiled);
