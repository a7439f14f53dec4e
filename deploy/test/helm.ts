/**
 * Runs the pinned Helm CLI against the umbrella chart and parses what it renders.
 *
 * Helm is built from the Go module pinned in e2e/components/helm/go.mod by
 * e2e/scripts/build-components.sh. It is looked up, in order, at $HELM, at
 * $KUBEPLUS_ISOLATION_ASSETS/helm, and in the build script's cache
 * ($KUBEPLUS_ISOLATION_CACHE or ~/.cache/kubeplus-isolation)/helm-<pinned version>/helm.
 * A missing binary is an error naming the build script, never a skipped test.
 */
import { execFile } from 'node:child_process';
import { accessSync, constants, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadAll } from 'js-yaml';

export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const CHART_DIR = join(REPO_ROOT, 'deploy', 'kubeplus-isolation');
export const RELEASE = 'kpi';
export const NAMESPACE = 'kubeplus-system';

/** The helm version e2e/components/helm/go.mod pins (e.g. v3.22.0). */
export function pinnedHelmVersion(): string {
  const gomod = readFileSync(join(REPO_ROOT, 'e2e', 'components', 'helm', 'go.mod'), 'utf8');
  const match = /^\s*(?:require\s+)?helm\.sh\/helm\/v3\s+(v\d+\.\d+\.\d+)\b/m.exec(gomod);
  if (!match?.[1]) throw new Error('cannot find the helm.sh/helm/v3 version in e2e/components/helm/go.mod');
  return match[1];
}

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** Absolute path of the helm binary, or an Error explaining how to build it. */
export function findHelm(): string {
  const tried: string[] = [];
  const candidates: string[] = [];
  if (process.env.HELM) candidates.push(process.env.HELM);
  if (process.env.KUBEPLUS_ISOLATION_ASSETS) candidates.push(join(process.env.KUBEPLUS_ISOLATION_ASSETS, 'helm'));
  const cache = process.env.KUBEPLUS_ISOLATION_CACHE ?? join(homedir(), '.cache', 'kubeplus-isolation');
  candidates.push(join(cache, `helm-${pinnedHelmVersion()}`, 'helm'));
  for (const candidate of candidates) {
    if (executable(candidate)) return candidate;
    tried.push(candidate);
  }
  throw new Error(
    `helm ${pinnedHelmVersion()} not found (tried ${tried.join(', ')}). Build it with ` +
      '`e2e/scripts/build-components.sh` (pinned in e2e/components/helm/go.mod; a cold build takes ~20 min), ' +
      'or set HELM / KUBEPLUS_ISOLATION_ASSETS to a directory holding it.',
  );
}

export interface HelmResult {
  code: number;
  stdout: string;
  stderr: string;
}

export function helm(args: readonly string[]): Promise<HelmResult> {
  const bin = findHelm();
  return new Promise((resolvePromise) => {
    execFile(
      bin,
      [...args],
      // No kubeconfig: `helm template` and `helm lint` must work without a cluster.
      {
        env: { ...process.env, KUBECONFIG: '/dev/null', HELM_CACHE_HOME: join(tmpdir(), 'kpi-helm-cache') },
        maxBuffer: 64 * 1024 * 1024,
      },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
        resolvePromise({ code, stdout, stderr });
      },
    );
  });
}

/** A rendered Kubernetes object (only the fields the tests read are typed). */
export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  [field: string]: unknown;
}

export interface RenderOptions {
  /** Extra `helm template` flags (e.g. `--set`, `--api-versions`). */
  args?: readonly string[];
  namespace?: string;
  release?: string;
}

async function template(values: unknown, options: RenderOptions): Promise<HelmResult> {
  const dir = mkdtempSync(join(tmpdir(), 'kpi-chart-'));
  try {
    const file = join(dir, 'values.json');
    writeFileSync(file, JSON.stringify(values ?? {}));
    return await helm([
      'template',
      options.release ?? RELEASE,
      CHART_DIR,
      '--namespace',
      options.namespace ?? NAMESPACE,
      '--values',
      file,
      ...(options.args ?? []),
    ]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Renders the umbrella chart with `values` and returns helm's output as printed; throws with helm's stderr on failure. */
export async function renderRaw(values: unknown = {}, options: RenderOptions = {}): Promise<string> {
  const result = await template(values, options);
  if (result.code !== 0) throw new Error(`helm template failed (exit ${result.code}):\n${result.stderr}`);
  return result.stdout;
}

/** Renders the umbrella chart with `values` and returns every object; throws with helm's stderr on failure. */
export async function render(values: unknown = {}, options: RenderOptions = {}): Promise<K8sObject[]> {
  const docs = loadAll(await renderRaw(values, options)) as unknown[];
  return docs.filter((d): d is K8sObject => d !== null && typeof d === 'object');
}

/** Renders expecting failure; returns helm's stderr (throws if rendering succeeded). */
export async function renderError(values: unknown, options: RenderOptions = {}): Promise<string> {
  const result = await template(values, options);
  if (result.code === 0) throw new Error(`helm template unexpectedly succeeded with ${JSON.stringify(values)}`);
  return result.stderr;
}

export function byKind(objects: readonly K8sObject[], kind: string): K8sObject[] {
  return objects.filter((o) => o.kind === kind);
}

/** The single object of `kind` (optionally named); throws if there is not exactly one. */
export function one(objects: readonly K8sObject[], kind: string, name?: string): K8sObject {
  const found = objects.filter((o) => o.kind === kind && (name === undefined || o.metadata.name === name));
  if (found.length !== 1) {
    throw new Error(
      `expected exactly one ${kind}${name ? ` named ${name}` : ''}, found ${found.length}: ` +
        objects.map((o) => `${o.kind}/${o.metadata.name}`).join(', '),
    );
  }
  return found[0] as K8sObject;
}
