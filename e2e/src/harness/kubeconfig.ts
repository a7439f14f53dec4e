import { writeFileSync } from 'node:fs';
import { dumpYaml, KubeConfig } from '@kubernetes/client-node';

const b64 = (text: string): string => Buffer.from(text, 'utf8').toString('base64');

export type KubeconfigCredentials = { certPem: string; keyPem: string } | { token: string };

export interface KubeconfigSpec {
  server: string;
  caPem: string;
  user: string;
  credentials: KubeconfigCredentials;
  /** Cluster/context name (default "kubeplus-e2e"). */
  name?: string;
}

/** A self-contained kubeconfig document (all material inline), usable by kubectl, helm and client-go. */
export function kubeconfigYaml(spec: KubeconfigSpec): string {
  const name = spec.name ?? 'kubeplus-e2e';
  const user =
    'token' in spec.credentials
      ? { token: spec.credentials.token }
      : { 'client-certificate-data': b64(spec.credentials.certPem), 'client-key-data': b64(spec.credentials.keyPem) };
  return dumpYaml({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name, cluster: { server: spec.server, 'certificate-authority-data': b64(spec.caPem) } }],
    users: [{ name: spec.user, user }],
    contexts: [{ name, context: { cluster: name, user: spec.user } }],
    'current-context': name,
    preferences: {},
  });
}

export function writeKubeconfig(path: string, spec: KubeconfigSpec): string {
  writeFileSync(path, kubeconfigYaml(spec), { mode: 0o600 });
  return path;
}

export function loadKubeConfig(path: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(path);
  return kc;
}
