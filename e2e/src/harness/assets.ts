import { execFile as execFileCb } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { repoRoot } from './repo.js';

const execFile = promisify(execFileCb);

export const REQUIRED_BINARIES = [
  'etcd',
  'kube-apiserver',
  'kube-controller-manager',
  'kube-scheduler',
  'kubectl',
  'helm',
] as const;
export type Binary = (typeof REQUIRED_BINARIES)[number];

export type Assets = Record<Binary, string> & { dir: string };

/** The binaries a control plane needs (kubectl and helm are for suites that shell out to them). */
export const CONTROL_PLANE_BINARIES = ['etcd', 'kube-apiserver', 'kube-controller-manager', 'kube-scheduler'] as const;

/** Paths of all binaries in `dir`; throws naming those of `needed` that are missing or not executable. */
export function assetsIn(dir: string, needed: readonly Binary[] = REQUIRED_BINARIES): Assets {
  const missing = needed.filter((name) => {
    try {
      accessSync(join(dir, name), constants.X_OK);
      return false;
    } catch {
      return true;
    }
  });
  const paths = Object.fromEntries(REQUIRED_BINARIES.map((name) => [name, join(dir, name)])) as Record<Binary, string>;
  if (missing.length > 0) {
    throw new Error(
      `${dir} lacks executable ${missing.join(', ')}; build them with \`make components\` ` +
        '(e2e/scripts/build-components.sh) or point KUBEPLUS_ISOLATION_ASSETS at a directory holding all of them',
    );
  }
  return { ...paths, dir };
}

/**
 * The directory of control-plane binaries: KUBEPLUS_ISOLATION_ASSETS if set, else whatever
 * e2e/scripts/build-components.sh prints last (it returns at once when its cache is warm, and
 * builds from the pinned Go modules otherwise).
 */
export async function resolveAssets(needed: readonly Binary[] = REQUIRED_BINARIES): Promise<Assets> {
  const fromEnv = process.env.KUBEPLUS_ISOLATION_ASSETS;
  if (fromEnv) return assetsIn(fromEnv, needed);
  const script = join(repoRoot(), 'e2e', 'scripts', 'build-components.sh');
  let stdout: string;
  try {
    ({ stdout } = await execFile(script, [], { maxBuffer: 16 * 1024 * 1024, timeout: 60 * 60 * 1000 }));
  } catch (error) {
    const stderr = (error as { stderr?: string }).stderr ?? '';
    throw new Error(`${script} failed: ${(error as Error).message}\n${stderr.split('\n').slice(-20).join('\n')}`);
  }
  const dir = stdout.trim().split('\n').at(-1);
  if (!dir) throw new Error(`${script} printed no assets directory`);
  return assetsIn(dir, needed);
}
