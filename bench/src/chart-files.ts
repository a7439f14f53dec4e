/**
 * The chart's verbatim files (deploy/kubeplus-isolation/files/*.yaml) as Kubernetes objects, in
 * file order: what the bench installs is exactly what the chart ships.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot } from '@kubeplus-isolation/e2e';
import { type KubernetesObject, loadAllYaml } from '@kubernetes/client-node';

export function chartFileObjects(...files: string[]): KubernetesObject[] {
  return files.flatMap((name) => {
    const text = readFileSync(join(repoRoot(), 'deploy', 'kubeplus-isolation', 'files', name), 'utf8');
    return (loadAllYaml(text) as (KubernetesObject | null)[]).filter((o): o is KubernetesObject => o !== null);
  });
}

/** The admission-policy engine as the chart installs it: the NodeIsolation CRD, then the engine. */
export function policyEngineFileObjects(): KubernetesObject[] {
  return chartFileObjects('node-isolation-params-crd.yaml', 'node-isolation-engine.yaml');
}
