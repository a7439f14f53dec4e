/**
 * Writes src/generated/validators.ts, the annotation validators as plain functions (see
 * compiler.ts), only when its content changes so `tsc -b` stays incremental. Run by `make
 * generate` (and thereby `make build`, `make lint`, `make test-unit`), `pnpm run generate` in
 * this package, and deploy/image/build-payload.sh: every `tsc -b` of the workspace needs it first.
 *
 *   node packages/spec/codegen/generate-validators.ts [--check]
 *
 * --check writes nothing and exits 1 if the file is missing or stale.
 * Node.js runs this file and the sources it imports as TypeScript (type stripping); the sources
 * import each other as `./x.js`, as tsc wants, so a resolve hook maps those to `./x.ts`.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { registerHooks } from 'node:module';
import { dirname, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const PACKAGE = new URL('../', import.meta.url);
registerHooks({
  resolve(specifier, context, next) {
    if (/^\.\.?\//.test(specifier) && specifier.endsWith('.js') && context.parentURL?.startsWith(PACKAGE.href)) {
      const ts = new URL(`${specifier.slice(0, -3)}.ts`, context.parentURL);
      if (existsSync(ts)) return next(ts.href, context);
    }
    return next(specifier, context);
  },
});

const { generateValidatorsModule } = await import('./compiler.js');
const target = fileURLToPath(new URL('src/generated/validators.ts', PACKAGE));
const shown = relative(process.cwd(), target);
const code = generateValidatorsModule();
const current = existsSync(target) ? readFileSync(target, 'utf8') : undefined;
if (process.argv.includes('--check')) {
  if (current !== code) {
    process.stderr.write(`${shown} is ${current === undefined ? 'missing' : 'stale'}: run make generate\n`);
    process.exit(1);
  }
} else if (current !== code) {
  mkdirSync(dirname(target), { recursive: true });
  writeFileSync(target, code);
  process.stderr.write(`generate-validators: wrote ${shown}\n`);
}
