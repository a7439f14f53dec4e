import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot } from './repo.js';

/** The project's images, as `make images` names them (IMAGE_REGISTRY and IMAGE_TAG left at their defaults). */
export type ProjectService = 'webhook' | 'operator';

/** The chart's appVersion: the images' default tag, and what the chart installs by default. */
export function appVersion(): string {
  const chart = readFileSync(join(repoRoot(), 'deploy', 'kubeplus-isolation', 'Chart.yaml'), 'utf8');
  const match = /^appVersion:\s*"?([^"\n]+)"?$/m.exec(chart);
  if (!match?.[1]) throw new Error('deploy/kubeplus-isolation/Chart.yaml has no appVersion');
  return match[1];
}

/** The subchart's default image repository (values.yaml `image.repository`), as `make images` names it. */
export function imageRepository(service: ProjectService): string {
  const values = readFileSync(
    join(repoRoot(), 'deploy', 'kubeplus-isolation', 'charts', service, 'values.yaml'),
    'utf8',
  );
  const match = /^image:\n(?: {2}.*\n)*? {2}repository: (\S+)$/m.exec(values);
  if (!match?.[1]) throw new Error(`deploy/kubeplus-isolation/charts/${service}/values.yaml has no image.repository`);
  return match[1];
}

export const projectImage = (service: ProjectService): string => `${imageRepository(service)}:${appVersion()}`;

/**
 * The image archives `make images` builds (dist/images/<service>.tar, or KUBEPLUS_ISOLATION_IMAGES),
 * which a real node imports as a user's node would pull them: each an OCI image index of a
 * linux/amd64 and a linux/arm64 image, of which containerd unpacks the node's own platform.
 * Throws saying how to build them.
 */
export function imageArchives(): string[] {
  const dir = process.env.KUBEPLUS_ISOLATION_IMAGES ?? join(repoRoot(), 'dist', 'images');
  const archives = (['webhook', 'operator'] as const).map((s) => join(dir, `${s}.tar`));
  const missing = archives.filter((a) => !existsSync(a));
  if (missing.length > 0) {
    throw new Error(`image archives missing: ${missing.join(', ')}; build them with \`make images\``);
  }
  return archives;
}
