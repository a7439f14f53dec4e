/**
 * The docs name files and folders of this repository (markdown links, and paths in backticks
 * such as `controllers/instances/reconciler.ts`). When code moves, those names go stale
 * silently; this test fails on every one that no longer names a tracked file or folder.
 *
 * A backticked path counts when it resolves against the document's folder or the repository
 * root, or when some tracked path ends with it (docs often name a file from its package's src/,
 * e.g. `cache/informer.ts`); a built output (`dist/…/x.js`) counts when its source
 * (`src/…/x.ts`) exists. Names of upstream files and of files made at build time are listed in
 * NOT_OURS with the reason.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { describe, expect, test } from '@jest/globals';

const ROOT = join(import.meta.dirname, '..', '..');

/** `doc: reference` pairs that name something outside this repository's tracked tree. */
const NOT_OURS: Record<string, string> = {
  'README.md: `../shared/seeds/`': 'the design documents, beside the repository (the README says where they came from)',
  'bench/notes.md: `runtime/derived-cache.ts`': 'history: the note tells how the file was later replaced by an index',
  'docs/benchmarks.md: `runtime/derived-cache.ts`': 'the same note, copied by the bench report',
  'e2e/DEMO.md: `manifests/`': "a folder the demo writes into its run's temporary directory",
  'e2e/README.md: `pki/`': "a folder of the harness run's temporary directory",
  'e2e/README.md: `k8s/crds/`': "upstream Agent Sandbox's module layout",
  'e2e/README.md: `k8s/controller.yaml`': "upstream Agent Sandbox's module layout",
  'e2e/components/README.md: `hack/lib/version.sh`': "upstream Kubernetes' build script",
  'packages/spec/README.md: `./x.js`': 'an example import specifier',
  'packages/spec/README.md: `./x.ts`': 'an example import specifier',
  'packages/spec/README.md: `ajv/dist/ajv.js`': "ajv's package layout",
  'packages/spec/README.md: `compile/`': "ajv's package layout",
  'packages/spec/README.md: `vocabularies/`': "ajv's package layout",
};

/** Made by `make` and ignored by git: the bootstrapped toolchain, image archives, generated validators. */
const BUILT = /^(\.tools\/|dist\/images\/)|(^|\/)src\/generated\//;

const PATH_LIKE = /\.(ts|js|md|ya?ml|json|sh|tpl|txt)$/;

/** Every stale reference in `docs` (path → text) against the tracked `files`, as `doc: reference`. */
function staleReferences(docs: ReadonlyMap<string, string>, files: readonly string[]): string[] {
  const tracked = new Set(files);
  const folders = new Set<string>();
  for (const f of files) {
    for (let d = dirname(f); d !== '.'; d = dirname(d)) folders.add(d);
  }
  const known = (p: string): boolean => tracked.has(p) || folders.has(p.replace(/\/$/, ''));
  const endsWith = (p: string): boolean => {
    const tail = `/${p.replace(/\/$/, '')}`;
    for (const f of tracked) if (`/${f}`.endsWith(tail)) return true;
    for (const d of folders) if (`/${d}`.endsWith(tail)) return true;
    return false;
  };
  const stale: string[] = [];
  for (const [doc, text] of docs) {
    const dir = dirname(doc);
    for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      if (target === undefined || /^(https?:|mailto:|#)/.test(target)) continue;
      const path = normalize(join(dir, target.split('#')[0] ?? ''));
      if (!known(path) && path !== '.') stale.push(`${doc}: link ${target}`);
    }
    for (const [, token] of text.matchAll(/`([^`\s]+)`/g)) {
      if (token === undefined || !token.includes('/')) continue;
      // Not a path of ours: patterns, commands, flags, absolute or home paths, Go-style import paths.
      if (/[*<>{}$=:,()]/.test(token) || /^[/~-]/.test(token) || /^[a-z0-9.-]+\.(io|com|dev|org)\//.test(token))
        continue;
      if (!PATH_LIKE.test(token) && !token.endsWith('/')) continue;
      const path = token.replace(/^\.\//, '');
      const source = path.replace(/(^|\/)dist\//, '$1src/').replace(/\.js$/, '.ts');
      if (BUILT.test(path)) continue;
      const found = [normalize(join(dir, path)), path, source].some(known) || endsWith(path) || endsWith(source);
      if (!found) stale.push(`${doc}: \`${token}\``);
    }
  }
  return stale;
}

describe('doc references', () => {
  test('flags a link and a backticked path that name nothing, and accepts what exists', () => {
    const files = ['services/op/src/controllers/a/setup.ts', 'docs/x.md', 'services/op/README.md'];
    const docs = new Map([
      [
        'services/op/README.md',
        '[x](../../docs/x.md) [y](../../docs/gone.md#a) `controllers/a/setup.ts` `controllers/a/reconciler.ts` `dist/controllers/a/setup.js` `controllers/a/` `k8s.io/api/core.go` `--flag=a/b.ts`',
      ],
    ]);
    expect(staleReferences(docs, files)).toEqual([
      'services/op/README.md: link ../../docs/gone.md#a',
      'services/op/README.md: `controllers/a/reconciler.ts`',
    ]);
  });

  test("every file and folder the repository's docs name exists", () => {
    const files = execFileSync('git', ['ls-files'], { cwd: ROOT, encoding: 'utf8' }).split('\n').filter(Boolean);
    const docs = new Map(
      files.filter((f) => f.endsWith('.md')).map((f) => [f, readFileSync(join(ROOT, f), 'utf8')] as const),
    );
    const stale = staleReferences(docs, files).filter((ref) => !(ref in NOT_OURS));
    expect(stale).toEqual([]);
  });

  test('every exception is still needed', () => {
    const files = execFileSync('git', ['ls-files'], { cwd: ROOT, encoding: 'utf8' }).split('\n').filter(Boolean);
    const docs = new Map(
      files.filter((f) => f.endsWith('.md')).map((f) => [f, readFileSync(join(ROOT, f), 'utf8')] as const),
    );
    const stale = new Set(staleReferences(docs, files));
    expect(Object.keys(NOT_OURS).filter((ref) => !stale.has(ref))).toEqual([]);
  });
});
