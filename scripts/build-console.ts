import { copyFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { basename, join, relative } from 'node:path';
import { build } from 'esbuild';
import { CONSOLE_DIR as OUT, CONSOLE_SOURCE_DIR as SOURCE, REPO_ROOT as ROOT } from '../src/console/console-paths';

/**
 * Builds the web console (console/) into dist/console: one hashed script and
 * stylesheet, so they can be cached for good, and an index.html naming them.
 * Runs in `npm ci` (prepare); everything it needs is in node_modules.
 */
async function main(): Promise<string> {
  rmSync(OUT, { recursive: true, force: true });
  mkdirSync(OUT, { recursive: true });
  const result = await build({
    entryPoints: [join(SOURCE, 'src', 'main.tsx')],
    bundle: true,
    minify: true,
    sourcemap: false,
    format: 'esm',
    target: ['es2022', 'chrome111', 'firefox113', 'safari16.4'],
    jsx: 'automatic',
    jsxImportSource: 'preact',
    outdir: join(OUT, 'assets'),
    entryNames: '[name]-[hash]',
    metafile: true,
    logLevel: 'warning',
    absWorkingDir: ROOT,
    legalComments: 'none',
  });
  const outputs = Object.keys(result.metafile.outputs).map((file) => relative(OUT, join(ROOT, file)));
  const script = outputs.find((file) => file.endsWith('.js'));
  const styles = outputs.find((file) => file.endsWith('.css'));
  if (!script || !styles) throw new Error(`unexpected build outputs: ${outputs.join(', ')}`);
  const html = readFileSync(join(SOURCE, 'index.html'), 'utf8').replace('%SCRIPT%', script).replace('%STYLES%', styles);
  writeFileSync(join(OUT, 'index.html'), html);
  copyFileSync(join(SOURCE, 'favicon.svg'), join(OUT, 'favicon.svg'));
  const bytes = outputs.map((file) => `${basename(file)} ${readFileSync(join(OUT, file)).length} B`);
  return `console built into ${relative(ROOT, OUT)}: ${bytes.join(', ')}`;
}

main().then(
  (summary) => console.log(summary),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
