/**
 * The KubePlus stand-in's decisions (e2e/src/kubeplus-standin/contract.ts), without a
 * cluster: what its webhook answers for each request the contract describes. The stand-in's I/O on
 * the real API server is proven in e2e/test/kubeplus-standin.test.ts.
 */
import { describe, expect, test } from '@jest/globals';
import {
  decide,
  helmReleaseStatus,
  isNameReuse,
  NOT_READY_MESSAGE,
  notesOf,
  parseHelmReleaseStatus,
  type ReviewRequest,
  STANDIN_GROUP,
  STANDIN_WEBHOOK_NAME,
  targetNamespace,
} from '../../src/kubeplus-standin/contract.js';

const KUBEPLUS_NS = 'default';
const absent = { exists: false, terminating: false };

function request(over: Partial<ReviewRequest>): ReviewRequest {
  return {
    uid: 'u1',
    operation: 'CREATE',
    group: STANDIN_GROUP,
    kind: 'WebApp',
    namespace: KUBEPLUS_NS,
    name: 'team-a',
    username: 'alice',
    object: { metadata: { name: 'team-a' } },
    ...over,
  };
}

describe('KubePlus stand-in: decisions', () => {
  test('the webhook name keeps KubePlus’s two segments and is valid (three segments)', () => {
    expect(STANDIN_WEBHOOK_NAME.startsWith('platform-as-code.crd-binding.')).toBe(true);
    expect(STANDIN_WEBHOOK_NAME.split('.')).toHaveLength(3);
  });

  test('the target namespace is the instance’s name in KubePlus’s namespace, else its own namespace', () => {
    expect(targetNamespace('default', 'default', 'team-a')).toBe('team-a');
    expect(targetNamespace('default', 'team-b', 'x')).toBe('team-b');
  });

  test('CREATE: accountidentity and created-by set (maps absent), namespace created, helm install', () => {
    expect(decide(request({}), KUBEPLUS_NS, absent)).toEqual({
      allowed: true,
      patch: [
        { op: 'add', path: '/metadata/annotations', value: { accountidentity: 'alice' } },
        { op: 'add', path: '/metadata/labels', value: { 'created-by': 'kubeplus' } },
      ],
      followUp: {
        kind: 'deploy',
        namespace: 'team-a',
        release: 'webapp-team-a',
        helm: 'install',
        createNamespace: true,
      },
    });
  });

  test('CREATE into an existing namespace of the same release: allowed, helm upgrade, accountidentity overwritten', () => {
    const d = decide(
      request({ object: { metadata: { name: 'team-a', annotations: { accountidentity: 'mallory' }, labels: {} } } }),
      KUBEPLUS_NS,
      { exists: true, terminating: false, releaseAnnotation: '"webapp-team-a"' },
    );
    expect(d).toEqual({
      allowed: true,
      patch: [
        { op: 'add', path: '/metadata/annotations/accountidentity', value: 'alice' },
        { op: 'add', path: '/metadata/labels/created-by', value: 'kubeplus' },
      ],
      followUp: {
        kind: 'deploy',
        namespace: 'team-a',
        release: 'webapp-team-a',
        helm: 'upgrade',
        createNamespace: false,
      },
    });
  });

  test('CREATE denied: namespace Terminating, release of another Kind, name too long', () => {
    expect(decide(request({}), KUBEPLUS_NS, { exists: true, terminating: true })).toMatchObject({
      allowed: false,
      message: expect.stringContaining('Terminating'),
    });
    expect(
      decide(request({}), KUBEPLUS_NS, { exists: true, terminating: false, releaseAnnotation: '"mysql-team-a"' }),
    ).toMatchObject({ allowed: false, message: expect.stringContaining('another Kind') });
    // "WebApp-" is 7 characters: a 23-character name is the longest accepted.
    const name23 = 'a'.repeat(23);
    expect(decide(request({ name: name23 }), KUBEPLUS_NS, absent).allowed).toBe(true);
    expect(decide(request({ name: `${name23}b` }), KUBEPLUS_NS, absent)).toMatchObject({
      allowed: false,
      message: expect.stringContaining('at most 30'),
    });
  });

  test('UPDATE: accountidentity rewritten to the requester; denied while the namespace is Terminating', () => {
    const update = request({
      operation: 'UPDATE',
      username: 'system:serviceaccount:kpi:operator',
      object: { metadata: { name: 'team-a', annotations: { accountidentity: 'alice' } } },
    });
    expect(decide(update, KUBEPLUS_NS, { exists: true, terminating: false })).toEqual({
      allowed: true,
      patch: [
        { op: 'add', path: '/metadata/annotations/accountidentity', value: 'system:serviceaccount:kpi:operator' },
      ],
      followUp: { kind: 'none' },
    });
    expect(decide(update, KUBEPLUS_NS, { exists: true, terminating: true })).toMatchObject({ allowed: false });
  });

  test('DELETE: needs status (unless labeled delete); then helm delete + namespace delete of status.helmrelease', () => {
    const del = (oldObject: ReviewRequest['oldObject']) =>
      decide(request({ operation: 'DELETE', object: undefined, oldObject }), KUBEPLUS_NS);
    expect(del({ metadata: { name: 'team-a' } })).toEqual({
      allowed: false,
      message: `WebApp team-a ${NOT_READY_MESSAGE}`,
      followUp: { kind: 'none' },
    });
    expect(del({ metadata: { name: 'team-a', labels: { delete: 'true' } } })).toEqual({
      allowed: true,
      patch: [],
      followUp: { kind: 'none' },
    });
    expect(
      del({
        metadata: { name: 'team-a' },
        status: { helmrelease: helmReleaseStatus('team-a', 'webapp-team-a', 'hi') },
      }),
    ).toEqual({
      allowed: true,
      patch: [],
      followUp: { kind: 'undeploy', namespace: 'team-a', release: 'webapp-team-a' },
    });
  });

  test('requests outside platformapi.kubeplus instances (CRDs, Namespaces, workflows) are allowed unchanged', () => {
    for (const r of [
      request({ group: 'apiextensions.k8s.io', kind: 'CustomResourceDefinition', namespace: '' }),
      request({ group: '', kind: 'Namespace', namespace: '' }),
      request({ group: 'workflows.kubeplus' }),
    ]) {
      expect(decide(r, KUBEPLUS_NS, absent)).toEqual({ allowed: true, patch: [], followUp: { kind: 'none' } });
    }
  });

  test('helm output: NOTES, the name re-use error, status.helmrelease round trip', () => {
    expect(notesOf('NAME: x\nSTATUS: deployed\nNOTES:\nhello\nworld\n')).toBe('hello\nworld');
    expect(notesOf('NAME: x\n')).toBe('');
    expect(isNameReuse('Error: INSTALLATION FAILED: cannot re-use a name that is still in use')).toBe(true);
    expect(isNameReuse('Error: INSTALLATION FAILED: execution error')).toBe(false);
    expect(parseHelmReleaseStatus(helmReleaseStatus('ns', 'rel', 'notes\nmore'))).toEqual({
      namespace: 'ns',
      release: 'rel',
    });
    expect(parseHelmReleaseStatus('garbage')).toBeUndefined();
    expect(parseHelmReleaseStatus(undefined)).toBeUndefined();
  });
});
