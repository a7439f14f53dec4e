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
 * The upstream CRDs of a pinned Go module (e2e/components/<component>), fetched into the Go
 * module cache by e2e/scripts/module-crds.sh, or the directory `envVar` names. Once per process.
 * Nothing outside the repository's own build inputs is read.
 */
function moduleCrdsDir(component: 'agent-sandbox' | 'openreports', envVar: string): string {
  const fromEnv = process.env[envVar];
  if (fromEnv !== undefined && fromEnv !== '') return resolve(fromEnv);
  const script = join(repoRoot(), 'e2e', 'scripts', 'module-crds.sh');
  const out = execFileSync(script, [component], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  const dir = out.trim().split('\n').at(-1);
  if (!dir) throw new Error(`${script} ${component} printed no directory`);
  process.env[envVar] = dir;
  return dir;
}

/** The Agent Sandbox CRDs: `k8s/crds/` of sigs.k8s.io/agent-sandbox, or KUBEPLUS_SANDBOX_CRDS_DIR. */
export function sandboxCrdsDir(): string {
  return moduleCrdsDir('agent-sandbox', 'KUBEPLUS_SANDBOX_CRDS_DIR');
}

/**
 * The Agent Sandbox CRDs of one pinned release, whichever this run uses: `''` the default
 * (e2e/components/agent-sandbox), `'0.5'` e2e/components/agent-sandbox-0.5 (e2e/README.md "Agent
 * Sandbox versions"). For a suite that moves a cluster from one release to another.
 */
export function sandboxCrdsDirOf(release: string): string {
  const script = join(repoRoot(), 'e2e', 'scripts', 'module-crds.sh');
  const env = { ...process.env, KUBEPLUS_ISOLATION_AGENT_SANDBOX: release, KUBEPLUS_SANDBOX_CRDS_DIR: '' };
  const out = execFileSync(script, ['agent-sandbox'], { encoding: 'utf8', env, stdio: ['ignore', 'pipe', 'inherit'] });
  const dir = out.trim().split('\n').at(-1);
  if (!dir) throw new Error(`${script} agent-sandbox (release ${release || 'default'}) printed no directory`);
  return dir;
}

/** The OpenReports CRDs: `config/crd/` of github.com/openreports/reports-api, or KUBEPLUS_OPENREPORTS_CRDS_DIR. */
export function openReportsCrdsDir(): string {
  return moduleCrdsDir('openreports', 'KUBEPLUS_OPENREPORTS_CRDS_DIR');
}

/** The hold's webhooks[] entry shared with the Helm chart (issue 35). */
export function holdEntryPath(): string {
  return join(repoRoot(), 'deploy', 'kubeplus-isolation', 'charts', 'webhook', 'files', 'hold-entry.json');
}

/** The webhooks[] entry shared with the Helm chart (single source of truth). */
export function webhookEntryPath(): string {
  return join(repoRoot(), 'deploy', 'kubeplus-isolation', 'charts', 'webhook', 'files', 'webhook-entry.json');
}
