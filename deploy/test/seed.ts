/**
 * The node-isolation webhooks[] entry exactly as the design document specifies it (the ```json
 * block under "Mutating webhook configuration changes" of the node-isolation design,
 * `000_9f65335c2952942a`), kept in the repository as fixtures/design-webhook-entry.json so the
 * chart tests read nothing outside it. KUBEPLUS_ISOLATION_DESIGN_ENTRY overrides the path.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT } from './helm.js';

export const DESIGN_ENTRY_PATH =
  process.env.KUBEPLUS_ISOLATION_DESIGN_ENTRY ??
  join(REPO_ROOT, 'deploy', 'test', 'fixtures', 'design-webhook-entry.json');

export function seedWebhookEntry(): Record<string, unknown> {
  const parsed: unknown = JSON.parse(readFileSync(DESIGN_ENTRY_PATH, 'utf8'));
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new Error(`${DESIGN_ENTRY_PATH}: the webhook entry is not a JSON object`);
  }
  return parsed as Record<string, unknown>;
}
