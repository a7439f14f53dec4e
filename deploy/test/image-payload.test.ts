/**
 * What an image would contain, built without a container engine: deploy/image/build-payload.sh
 * (the very script the Dockerfiles run) in a clean copy of the sources, offline from the local
 * pnpm store. The payload must hold the entry point, no devDependency of the service, nothing
 * writable by the runtime user, and must start (`--help`) with only what it ships.
 */
import { execFile } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join, relative } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, jest, test } from '@jest/globals';
import { REPO_ROOT } from './helm.js';

jest.setTimeout(300_000);
const run = promisify(execFile);

/** Like the .dockerignore: no dependencies, build output, generated sources, toolchains or git metadata. */
const EXCLUDED = new Set(['node_modules', 'dist', '.git', '.tools', 'coverage', '.e2e-tmp', 'components']);
// Generated sources (packages/spec/src/generated; `**/src/generated` in .dockerignore): the build must write them.
const GENERATED = /(^|\/)src\/generated$/;

function copySources(to: string): void {
  cpSync(REPO_ROOT, to, {
    recursive: true,
    filter: (src) => {
      const rel = relative(REPO_ROOT, src);
      if (rel === '') return true;
      const name = basename(src);
      return !EXCLUDED.has(name) && !GENERATED.test(rel) && !name.endsWith('.tsbuildinfo') && !rel.startsWith('docs');
    },
  });
}

/** Every file below `dir` (not following symlinks). */
function walk(dir: string, out: string[] = []): string[] {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) walk(path, out);
    else out.push(path);
  }
  return out;
}

const work = mkdtempSync(join(tmpdir(), 'kpi-payload-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

const PATH = `${join(REPO_ROOT, '.tools', 'node_modules', '.bin')}:${process.env.PATH ?? ''}`;
let context: Promise<{ dir: string; store: string }> | undefined;

/** One clean copy for both services (the build script installs into it). */
function sharedContext(): Promise<{ dir: string; store: string }> {
  context ??= (async () => {
    const dir = join(work, 'context');
    copySources(dir);
    const { stdout } = await run('pnpm', ['store', 'path'], { cwd: REPO_ROOT, env: { ...process.env, PATH } });
    return { dir, store: stdout.trim() };
  })();
  return context;
}

describe.each(['webhook', 'operator'])('payload of %s', (service) => {
  test('holds the entry point and production dependencies only, read-only, and starts', async () => {
    const { dir, store } = await sharedContext();
    const out = join(work, `${service}-app`);
    try {
      await run(join(dir, 'deploy', 'image', 'build-payload.sh'), [service, out], {
        cwd: dir,
        env: { ...process.env, PATH, PNPM_STORE_DIR: store, CI: 'true' },
        maxBuffer: 64 * 1024 * 1024,
      });
    } catch (error) {
      const e = error as { stdout?: string; stderr?: string; message: string };
      throw new Error(`build-payload.sh ${service} failed: ${e.message}\n${e.stdout ?? ''}\n${e.stderr ?? ''}`);
    }
    const pkg = JSON.parse(readFileSync(join(dir, 'services', service, 'package.json'), 'utf8')) as {
      main: string;
      dependencies: Record<string, string>;
      devDependencies?: Record<string, string>;
    };
    expect(existsSync(join(out, pkg.main))).toBe(true);
    // Production dependencies are there, devDependencies are not (neither linked nor in the store).
    const linked = readdirSync(join(out, 'node_modules')).flatMap((name) =>
      name.startsWith('@') ? readdirSync(join(out, 'node_modules', name)).map((n) => `${name}/${n}`) : [name],
    );
    for (const dep of Object.keys(pkg.dependencies)) expect(linked).toContain(dep);
    const virtualStore = readdirSync(join(out, 'node_modules', '.pnpm'));
    for (const dev of Object.keys(pkg.devDependencies ?? {})) {
      expect(linked).not.toContain(dev);
      expect(virtualStore.filter((d) => d.startsWith(`${dev.replace('/', '+')}@`))).toEqual([]);
    }
    for (const tool of ['typescript', 'jest', '@biomejs+biome', '@swc+core']) {
      expect(virtualStore.filter((d) => d.startsWith(`${tool}@`))).toEqual([]);
    }
    // No sources, tests or tsconfig: only what `files` in package.json lists.
    expect(existsSync(join(out, 'src'))).toBe(false);
    expect(existsSync(join(out, 'test'))).toBe(false);
    // Readable by everyone (the runtime user is 65532), writable only by the owner (root in the image).
    for (const file of walk(out)) {
      const mode = statSync(file).mode;
      expect({
        file: relative(out, file),
        readable: (mode & 0o004) !== 0,
        groupOrOtherWritable: (mode & 0o022) !== 0,
      }).toEqual({
        file: relative(out, file),
        readable: true,
        groupOrOtherWritable: false,
      });
    }
    // It starts with nothing but what it ships (cwd outside the repository, no NODE_PATH).
    const { stdout } = await run(process.execPath, [join(out, pkg.main), '--help'], {
      cwd: work,
      env: { PATH: '/usr/bin:/bin', NODE_ENV: 'production' },
    });
    expect(stdout).toMatch(/^Usage: /);
  });
});
