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

/** `<repo>/../shared/fixtures/agent-sandbox`, or KUBEPLUS_SANDBOX_CRDS_DIR. */
export function sandboxCrdsDir(): string {
  return resolve(
    process.env.KUBEPLUS_SANDBOX_CRDS_DIR ?? join(repoRoot(), '..', 'shared', 'fixtures', 'agent-sandbox'),
  );
}

/** The webhooks[] entry shared with the Helm chart (single source of truth). */
export function webhookEntryPath(): string {
  return join(repoRoot(), 'deploy', 'kubeplus-isolation', 'charts', 'webhook', 'files', 'webhook-entry.json');
}
