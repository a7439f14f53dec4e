import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from '@jest/globals';
import { loadYaml } from '@kubernetes/client-node';
import { RUNTIME_CLASS_PATH, RUNTIME_CLASS_POINTER, SANDBOX_RESOURCES } from '../../src/desired/agent-sandbox.js';

/**
 * The Agent Sandbox CRDs of the release the project pins: `k8s/crds/` of the Go module in
 * e2e/components/agent-sandbox, which e2e/scripts/module-crds.sh fetches into the Go module
 * cache (or KUBEPLUS_SANDBOX_CRDS_DIR).
 */
const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../../../..');
const fixtures =
  process.env.KUBEPLUS_SANDBOX_CRDS_DIR ||
  (execFileSync(resolve(repoRoot, 'e2e/scripts/module-crds.sh'), ['agent-sandbox'], { encoding: 'utf8' })
    .trim()
    .split('\n')
    .at(-1) ??
    '');

interface CrdVersion {
  name: string;
  served: boolean;
  schema: { openAPIV3Schema: Schema };
}
interface Schema {
  properties?: Record<string, Schema>;
  type?: string;
}
interface Crd {
  spec: { group: string; names: { kind: string; plural: string }; scope: string; versions: CrdVersion[] };
}

function crd(group: string, plural: string): Crd {
  const file = resolve(fixtures, `${group}_${plural}.yaml`);
  if (!existsSync(file)) throw new Error(`Agent Sandbox CRD fixture missing: ${file}`);
  return loadYaml<Crd>(readFileSync(file, 'utf8'));
}

describe('the Agent Sandbox facts match the real CRDs', () => {
  it.each(SANDBOX_RESOURCES.map((r) => [r.kind, r] as const))(
    '%s: group, plural, scope and served versions',
    (_k, r) => {
      const c = crd(r.group, r.resource);
      expect(c.spec.group).toBe(r.group);
      expect(c.spec.names).toMatchObject({ kind: r.kind, plural: r.resource });
      expect(c.spec.scope).toBe('Namespaced');
      const served = c.spec.versions.filter((v) => v.served).map((v) => v.name);
      expect([...served].sort()).toEqual([...r.versions].sort());
    },
  );

  it.each(SANDBOX_RESOURCES.map((r) => [r.kind, r] as const))(
    '%s: runtimeClassName is a string at the same path in every version',
    (_k, r) => {
      for (const v of crd(r.group, r.resource).spec.versions) {
        let node: Schema | undefined = v.schema.openAPIV3Schema;
        for (const field of RUNTIME_CLASS_PATH) node = node?.properties?.[field];
        expect(node?.type).toBe('string');
      }
    },
  );

  it('has the JSON Pointer of that path', () => {
    expect(RUNTIME_CLASS_POINTER).toBe('/spec/podTemplate/spec/runtimeClassName');
  });
});
