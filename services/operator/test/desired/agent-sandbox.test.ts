import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from '@jest/globals';
import { loadYaml } from '@kubernetes/client-node';
import { RUNTIME_CLASS_PATH, RUNTIME_CLASS_POINTER, SANDBOX_RESOURCES } from '../../src/desired/agent-sandbox.js';

/**
 * The Agent Sandbox CRDs of every release the project supports: `k8s/crds/` of the Go module in
 * e2e/components/agent-sandbox (v1.0.x, the default) and e2e/components/agent-sandbox-0.5 (v0.5.x),
 * which e2e/scripts/module-crds.sh fetches into the Go module cache.
 */
const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../../../..');
const RELEASES = [
  { name: 'default (v1.0.x)', select: '' },
  { name: 'v0.5.x', select: '0.5' },
] as const;
function crdsDir(select: string): string {
  const env = { ...process.env, KUBEPLUS_ISOLATION_AGENT_SANDBOX: select, KUBEPLUS_SANDBOX_CRDS_DIR: '' };
  return (
    execFileSync(resolve(repoRoot, 'e2e/scripts/module-crds.sh'), ['agent-sandbox'], { encoding: 'utf8', env })
      .trim()
      .split('\n')
      .at(-1) ?? ''
  );
}
const dirs = new Map<string, string>(RELEASES.map((r) => [r.name, crdsDir(r.select)]));

interface CrdVersion {
  name: string;
  served: boolean;
  storage: boolean;
  schema: { openAPIV3Schema: Schema };
}
interface Schema {
  properties?: Record<string, Schema>;
  type?: string;
}
interface Crd {
  spec: { group: string; names: { kind: string; plural: string }; scope: string; versions: CrdVersion[] };
}

function crd(release: string, group: string, plural: string): Crd {
  const file = resolve(dirs.get(release) ?? '', `${group}_${plural}.yaml`);
  if (!existsSync(file)) throw new Error(`Agent Sandbox CRD fixture missing: ${file}`);
  return loadYaml<Crd>(readFileSync(file, 'utf8'));
}

const cases = RELEASES.flatMap((release) => SANDBOX_RESOURCES.map((r) => [release.name, r.kind, r] as const));

describe('the Agent Sandbox facts match the real CRDs of every supported release', () => {
  it.each(cases)(
    '%s %s: group, plural, scope; v1beta1 is the storage version; every served version is listed',
    (release, _k, r) => {
      const c = crd(release, r.group, r.resource);
      expect(c.spec.group).toBe(r.group);
      expect(c.spec.names).toMatchObject({ kind: r.kind, plural: r.resource });
      expect(c.spec.scope).toBe('Namespaced');
      expect(c.spec.versions.find((v) => v.storage)?.name).toBe(r.versions[0]);
      // A served version the policies did not list would be judged only through conversion.
      for (const v of c.spec.versions.filter((v) => v.served)) expect(r.versions).toContain(v.name);
    },
  );

  it('every version the policies list is served by some supported release (none is dead weight)', () => {
    for (const r of SANDBOX_RESOURCES) {
      const served = new Set(
        RELEASES.flatMap((release) =>
          crd(release.name, r.group, r.resource)
            .spec.versions.filter((v) => v.served)
            .map((v) => v.name),
        ),
      );
      expect([...served].sort()).toEqual([...r.versions].sort());
    }
  });

  it('the default release serves v1beta1 only; v0.5.x also serves v1alpha1', () => {
    const served = (release: string) =>
      crd(release, 'agents.x-k8s.io', 'sandboxes')
        .spec.versions.filter((v) => v.served)
        .map((v) => v.name)
        .sort();
    expect(served('default (v1.0.x)')).toEqual(['v1beta1']);
    expect(served('v0.5.x')).toEqual(['v1alpha1', 'v1beta1']);
  });

  it.each(cases)('%s %s: runtimeClassName is a string at the same path in every version', (release, _k, r) => {
    for (const v of crd(release, r.group, r.resource).spec.versions) {
      let node: Schema | undefined = v.schema.openAPIV3Schema;
      for (const field of RUNTIME_CLASS_PATH) node = node?.properties?.[field];
      expect(node?.type).toBe('string');
    }
  });

  it('has the JSON Pointer of that path', () => {
    expect(RUNTIME_CLASS_POINTER).toBe('/spec/podTemplate/spec/runtimeClassName');
  });
});
