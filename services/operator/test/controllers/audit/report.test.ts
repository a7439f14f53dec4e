import { describe, expect, it } from '@jest/globals';
import type { UnisolatedPod } from '@kubeplus-isolation/spec';
import {
  addPage,
  auditedNamespace,
  auditFingerprint,
  emptyFindings,
  isolatedAgainMessage,
  missingKind,
  notIsolatedMessage,
  totalOf,
} from '../../../src/controllers/audit/report.js';

const ENABLED = 'kubeplus.io/node-isolation-enabled';
const RESOLVED = 'kubeplus.io/node-isolation-resolved';
const OWNER = 'kubeplus.io/owner';
const MANDATE = '{"nodeSelector":{"pool":"a"},"tolerations":[]}';

describe('auditedNamespace', () => {
  it('audits exactly the namespaces the webhook patches: label "true" and a valid mandate', () => {
    expect(auditedNamespace({ labels: { [ENABLED]: 'true' }, annotations: { [RESOLVED]: MANDATE } })).toEqual({
      state: 'isolated',
      spec: { nodeSelector: { pool: 'a' }, tolerations: [] },
      owner: undefined,
    });
    expect(auditedNamespace({ labels: { [ENABLED]: 'false' }, annotations: { [RESOLVED]: MANDATE } })).toEqual({
      state: 'not-isolated',
    });
    expect(auditedNamespace({ annotations: { [RESOLVED]: MANDATE } })).toEqual({ state: 'not-isolated' });
  });

  it('names the owner from kubeplus.io/owner, and none for a malformed one', () => {
    const meta = (owner: string) => ({
      labels: { [ENABLED]: 'true' },
      annotations: { [RESOLVED]: MANDATE, [OWNER]: owner },
    });
    expect(auditedNamespace(meta('cloudark.io/Agent/team-a/agent-x'))).toMatchObject({
      owner: { group: 'cloudark.io', kind: 'Agent', namespace: 'team-a', name: 'agent-x' },
    });
    expect(auditedNamespace(meta('not-an-identity'))).toMatchObject({ state: 'isolated', owner: undefined });
  });

  it('calls a labelled namespace without a valid mandate invalid, with the reasons', () => {
    expect(auditedNamespace({ labels: { [ENABLED]: 'true' } })).toEqual({
      state: 'invalid',
      errors: ['no kubeplus.io/node-isolation-resolved annotation'],
    });
    const invalid = auditedNamespace({
      labels: { [ENABLED]: 'true' },
      annotations: { [RESOLVED]: '{"nodeSelector":' },
    });
    expect(invalid.state).toBe('invalid');
    expect(auditedNamespace({ labels: { [ENABLED]: 'true' }, annotations: { [RESOLVED]: '{}' } })).toMatchObject({
      state: 'invalid',
      errors: ['must mandate at least one nodeSelector entry or one toleration'],
    });
  });
});

describe('auditFingerprint', () => {
  it('changes with the label, the mandate and the owner, and with nothing else', () => {
    const base = { labels: { [ENABLED]: 'true', team: 'a' }, annotations: { [RESOLVED]: MANDATE, note: 'x' } };
    const same = { labels: { [ENABLED]: 'true', team: 'b' }, annotations: { [RESOLVED]: MANDATE, note: 'y' } };
    expect(auditFingerprint(same)).toBe(auditFingerprint(base));
    for (const changed of [
      { ...base, labels: { team: 'a' } },
      { ...base, annotations: { [RESOLVED]: '{"nodeSelector":{"pool":"b"},"tolerations":[]}' } },
      { ...base, annotations: { ...base.annotations, [OWNER]: 'g/K/ns/n' } },
    ]) {
      expect(auditFingerprint(changed)).not.toBe(auditFingerprint(base));
    }
  });
});

const unisolated = (name: string, ...missing: UnisolatedPod['missing']): UnisolatedPod => ({
  name,
  missing,
  missingNodeSelector: {},
  missingTolerations: [],
});

describe('findings', () => {
  it('partition Pods by what they lack, so the gauge sums to the total', () => {
    expect(missingKind(['nodeSelector'])).toBe('node_selector');
    expect(missingKind(['tolerations'])).toBe('tolerations');
    expect(missingKind(['nodeSelector', 'tolerations'])).toBe('both');
  });

  it('add up over pages, counting every Pod but naming only the first `keep`', () => {
    let f = emptyFindings();
    f = addPage(f, 500, [unisolated('a', 'nodeSelector'), unisolated('b', 'nodeSelector', 'tolerations')], 3);
    f = addPage(f, 500, [], 3);
    f = addPage(f, 7, [unisolated('c', 'tolerations'), unisolated('d', 'tolerations')], 3);
    expect(f).toEqual({
      counts: { node_selector: 1, tolerations: 2, both: 1 },
      pods: [
        unisolated('a', 'nodeSelector'),
        unisolated('b', 'nodeSelector', 'tolerations'),
        unisolated('c', 'tolerations'),
      ],
      checked: 1007,
    });
    expect(totalOf(f.counts)).toBe(4);
  });
});

describe('notIsolatedMessage', () => {
  it('gives the count, names up to maxPods Pods with what they lack, and how many more', () => {
    const f = addPage(
      emptyFindings(),
      4,
      [
        unisolated('web-1', 'nodeSelector', 'tolerations'),
        unisolated('web-2', 'tolerations'),
        unisolated('job', 'nodeSelector'),
      ],
      10,
    );
    expect(notIsolatedMessage('team-a', f, 10)).toBe(
      '3 Pods in namespace team-a lack the node placement it mandates: web-1 (nodeSelector, tolerations), ' +
        'web-2 (tolerations), job (nodeSelector). Admitted without it (the node-isolation webhook fails open, ' +
        'e.g. while it was unavailable); the operator never changes Pods: recreate them to place them.',
    );
    expect(notIsolatedMessage('team-a', f, 2)).toContain(
      ': web-1 (nodeSelector, tolerations), web-2 (tolerations) and 1 more.',
    );
    expect(notIsolatedMessage('team-a', f, 0)).toMatch(
      /^3 Pods in namespace team-a lack the node placement it mandates\. Admitted/,
    );
    const one = addPage(emptyFindings(), 1, [unisolated('solo', 'tolerations')], 10);
    expect(notIsolatedMessage('b', one, 10)).toMatch(
      /^1 Pod in namespace b lacks the node placement it mandates: solo \(tolerations\)\./,
    );
  });

  it('stays within the Event limit however long the names are, and still counts them all', () => {
    const long = Array.from({ length: 40 }, (_, i) => unisolated(`${'p'.repeat(240)}-${i}`, 'nodeSelector'));
    const f = addPage(emptyFindings(), 40, long, 100);
    const message = notIsolatedMessage('ns', f, 10);
    expect(message.length).toBeLessThanOrEqual(1024);
    expect(message).toMatch(/^40 Pods in namespace ns lack/);
    expect(message).toMatch(/ and 3[6-9] more\. Admitted/);
    const named = (message.match(/p{240}-\d+ \(nodeSelector\)/g) ?? []).length;
    expect(named).toBeGreaterThan(0);
    expect(message).toContain(`and ${40 - named} more`);
  });

  it('says when a namespace is clean again', () => {
    expect(isolatedAgainMessage('team-a', 3)).toBe(
      'No Pod in namespace team-a lacks the mandated node placement any more (3 did at the previous audit).',
    );
  });
});
