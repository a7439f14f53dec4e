import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The monorepo root: the nearest ancestor of this file holding pnpm-workspace.yaml (works from src/ and dist/). */
export function repoRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    if (existsSync(join(dir, 'pnpm-workspace.yaml'))) return dir;
    const parent = dirname(dir);
    if (parent === dir)
      throw new Error(`cannot find the repository root (pnpm-workspace.yaml) above ${fileURLToPath(import.meta.url)}`);
    dir = parent;
  }
}

/**
 * The Agent Sandbox CRDs: `k8s/crds/` of the Go module pinned in e2e/components/agent-sandbox
 * (fetched into the Go module cache by e2e/scripts/agent-sandbox-crds.sh), or
 * KUBEPLUS_SANDBOX_CRDS_DIR. Nothing outside the repository's own build inputs is read.
 */
export function sandboxCrdsDir(): string {
  const fromEnv = process.env.KUBEPLUS_SANDBOX_CRDS_DIR;
  if (fromEnv !== undefined && fromEnv !== '') return resolve(fromEnv);
  const script = join(repoRoot(), 'e2e', 'scripts', 'agent-sandbox-crds.sh');
  const out = execFileSync(script, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  const dir = out.trim().split('\n').at(-1);
  if (!dir) throw new Error(`${script} printed no directory`);
  process.env.KUBEPLUS_SANDBOX_CRDS_DIR = dir; // once per process
  return dir;
}

/**
 * Directory of the OpenReports CRDs (config/crd of github.com/openreports/reports-api, pinned in
 * e2e/components/openreports): KUBEPLUS_OPENREPORTS_CRDS_DIR, else e2e/scripts/openreports-crds.sh.
 */
export function openReportsCrdsDir(): string {
  const fromEnv = process.env.KUBEPLUS_OPENREPORTS_CRDS_DIR;
  if (fromEnv !== undefined && fromEnv !== '') return resolve(fromEnv);
  const script = join(repoRoot(), 'e2e', 'scripts', 'openreports-crds.sh');
  const out = execFileSync(script, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  const dir = out.trim().split('\n').at(-1);
  if (!dir) throw new Error(`${script} printed no directory`);
  process.env.KUBEPLUS_OPENREPORTS_CRDS_DIR = dir; // once per process
  return dir;
}

/** The webhooks[] entry shared with the Helm chart (single source of truth). */
export function webhookEntryPath(): string {
  return join(repoRoot(), 'deploy', 'kubeplus-isolation', 'charts', 'webhook', 'files', 'webhook-entry.json');
}
