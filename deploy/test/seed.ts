/**
 * The node-isolation webhooks[] entry exactly as the design document specifies it, parsed from
 * the document itself: the first ```json block after "### Mutating webhook configuration
 * changes" in ../shared/seeds/000_9f65335c2952942a.txt (CI checks the repository out with
 * ../shared beside it). KUBEPLUS_ISOLATION_SEED overrides the path.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT } from './helm.js';

export const SEED_PATH =
  process.env.KUBEPLUS_ISOLATION_SEED ?? join(REPO_ROOT, '..', 'shared', 'seeds', '000_9f65335c2952942a.txt');

export function seedWebhookEntry(): Record<string, unknown> {
  if (!existsSync(SEED_PATH)) {
    throw new Error(
      `design document ${SEED_PATH} not found: check out ../shared beside the repository, or set KUBEPLUS_ISOLATION_SEED`,
    );
  }
  const text = readFileSync(SEED_PATH, 'utf8');
  const section = text.indexOf('### Mutating webhook configuration changes');
  if (section < 0) throw new Error(`${SEED_PATH} has no "### Mutating webhook configuration changes" section`);
  const block = /```json\s*\n([\s\S]*?)\n```/.exec(text.slice(section));
  if (!block?.[1]) throw new Error(`${SEED_PATH}: no \`\`\`json block in the webhook configuration section`);
  const parsed: unknown = JSON.parse(block[1]);
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new Error(`${SEED_PATH}: the webhook entry is not a JSON object`);
  }
  return parsed as Record<string, unknown>;
}
