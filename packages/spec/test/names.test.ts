import { createHash } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import {
  boundedName,
  isDns1123Label,
  isDns1123Subdomain,
  isLabelValue,
  isQualifiedName,
  labelValue,
  policyName,
  runtimeClassName,
  tenantNamespaceForName,
} from '../src/index.js';

describe('runtimeClassName', () => {
  it("is kubeplus-sandbox-<instance> for the design document's instance", () => {
    expect(runtimeClassName('team-a-agent-instance')).toBe('kubeplus-sandbox-team-a-agent-instance');
  });

  it('keeps dotted instance names (RuntimeClass names are DNS subdomains)', () => {
    expect(runtimeClassName('agent.v2')).toBe('kubeplus-sandbox-agent.v2');
  });

  it('bounds an over-long name with a stable hash suffix', () => {
    const long = 'a'.repeat(250);
    const name = runtimeClassName(long);
    expect(name.length).toBeLessThanOrEqual(253);
    expect(isDns1123Subdomain(name)).toBe(true);
    expect(name).toMatch(/^kubeplus-sandbox-a+-[0-9a-f]{10}$/);
    expect(runtimeClassName(long)).toBe(name);
    expect(runtimeClassName(`${'a'.repeat(249)}b`)).not.toBe(name);
  });
});

describe('policyName', () => {
  const agent = (namespace: string, name: string, kind = 'Agent', group = 'cloudark.io') => ({
    group,
    kind,
    namespace,
    name,
  });
  // sha256('cloudark.io/Agent/team-a/agent'), first 10 hex digits, computed independently:
  // `printf %s cloudark.io/Agent/team-a/agent | sha256sum | cut -c1-10`
  const HASH = createHash('sha256').update('cloudark.io/Agent/team-a/agent').digest('hex').slice(0, 10);

  it('is kubeplus-sandbox-<namespace>.<name>-<hash of group/Kind/namespace/name>-<role>, one per role', () => {
    expect(policyName(agent('team-a', 'agent'), 'enforce')).toBe(`kubeplus-sandbox-team-a.agent-${HASH}-enforce`);
    expect(policyName(agent('team-a', 'agent'), 'advisory')).toBe(`kubeplus-sandbox-team-a.agent-${HASH}-advisory`);
    expect(policyName(agent('team-a', 'agent'), 'default')).toBe(`kubeplus-sandbox-team-a.agent-${HASH}-default`);
  });

  it('differs for the same name in two namespaces, two Kinds or two groups (issue 21: one instance, one set of names)', () => {
    const names = [
      agent('team-a', 'agent'),
      agent('team-b', 'agent'),
      agent('team-a', 'agent', 'Notebook'),
      agent('team-a', 'agent', 'Agent', 'example.com'),
      // `<namespace>.<name>` is unambiguous: a namespace is a DNS label, it has no dot.
      agent('team', 'a.agent'),
    ].map((o) => policyName(o, 'enforce'));
    expect(new Set(names).size).toBe(names.length);
  });

  it('never equals the name the instance alone gave (the legacy name is told apart by the upgrade)', () => {
    expect(policyName(agent('team-a', 'agent'), 'enforce')).not.toBe('kubeplus-sandbox-agent-enforce');
  });

  it('is a valid DNS-1123 subdomain within 253 characters, keeps the role, and is deterministic and identity-unique for any identity', () => {
    const label = fc.stringMatching(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/);
    const subdomain = fc.stringMatching(/^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/);
    fc.assert(
      fc.property(label, subdomain, subdomain, fc.constantFrom('enforce', 'advisory', 'default'), (ns, a, b, role) => {
        const n = policyName(agent(ns, a), role);
        const again = policyName(agent(ns, a), role);
        const other = policyName(agent(ns, b), role);
        return (
          n.length <= 253 && isDns1123Subdomain(n) && n.endsWith(`-${role}`) && n === again && (a === b || n !== other)
        );
      }),
    );
  });

  it('cuts the readable part of an over-long identity but keeps the identity hash', () => {
    const long = agent('n'.repeat(63), 'x'.repeat(253));
    const name = policyName(long, 'enforce');
    const hash = createHash('sha256')
      .update(`cloudark.io/Agent/${'n'.repeat(63)}/${'x'.repeat(253)}`)
      .digest('hex');
    expect(name.length).toBeLessThanOrEqual(253);
    expect(isDns1123Subdomain(name)).toBe(true);
    expect(name).toMatch(new RegExp(`^kubeplus-sandbox-n+-x+-${hash.slice(0, 10)}-enforce$`));
    expect(policyName(agent('n'.repeat(63), `${'x'.repeat(252)}y`), 'enforce')).not.toBe(name);
  });
});

describe('boundedName', () => {
  it('is always a valid DNS-1123 subdomain within the limit, and deterministic', () => {
    fc.assert(
      fc.property(fc.string({ minLength: 1, maxLength: 300 }), fc.integer({ min: 36, max: 253 }), (base, max) => {
        const n = boundedName('kubeplus-sandbox-', base, '-enforce', max);
        return (
          n.length <= max && isDns1123Subdomain(n) && n === boundedName('kubeplus-sandbox-', base, '-enforce', max)
        );
      }),
    );
  });

  it('refuses a limit that leaves no room for the hash', () => {
    expect(() => boundedName('kubeplus-sandbox-', 'x'.repeat(40), '-enforce', 30)).toThrow(RangeError);
  });

  it('never produces empty DNS labels from dotted input', () => {
    expect(isDns1123Subdomain(boundedName('p-', `a.-b..c${'x'.repeat(50)}`, '', 30))).toBe(true);
  });

  it('maps distinct over-long inputs to distinct names', () => {
    const a = boundedName('p-', `${'a'.repeat(100)}1`, '', 40);
    const b = boundedName('p-', `${'a'.repeat(100)}2`, '', 40);
    expect(a).not.toBe(b);
  });
});

describe('labelValue', () => {
  it('passes valid label values through', () => {
    expect(labelValue('team-a-agent-instance')).toBe('team-a-agent-instance');
  });

  it('bounds and cleans anything else, stably', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 200 }), (s) => {
        const v = labelValue(s);
        return isLabelValue(v) && v === labelValue(s);
      }),
    );
    expect(labelValue('x'.repeat(80))).toMatch(/^x{52}-[0-9a-f]{10}$/);
  });
});

describe('tenantNamespaceForName', () => {
  it('uses the instance name when it is a valid namespace name', () => {
    expect(tenantNamespaceForName('team-a')).toBe('team-a');
  });
  it('refuses names that cannot be namespaces', () => {
    expect(tenantNamespaceForName('agent.v2')).toBeUndefined();
    expect(tenantNamespaceForName('n'.repeat(64))).toBeUndefined();
  });
});

describe('Kubernetes name rules', () => {
  it.each([
    ['pool', true],
    ['kubernetes.io/hostname', true],
    ['a/b/c', false],
    ['/x', false],
    ['Example.com/x', false],
    ['x/', false],
    ['_x', false],
    [`${'p'.repeat(254)}/x`, false],
    ['n'.repeat(63), true],
    ['n'.repeat(64), false],
  ])('isQualifiedName(%j) is %s', (s, ok) => {
    expect(isQualifiedName(s)).toBe(ok);
  });

  it.each([
    ['team-a', true],
    ['Team-a', false],
    ['a.b', false],
    ['-a', false],
    ['a'.repeat(64), false],
  ])('isDns1123Label(%j) is %s', (s, ok) => {
    expect(isDns1123Label(s)).toBe(ok);
  });
});
