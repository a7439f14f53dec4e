/**
 * The webhook-certificates controller as the operator sets it up (setup.ts), on the in-memory
 * world of the wiring tests: a labelled MutatingWebhookConfiguration in its cache gets a CA and a
 * serving certificate from the leader, and `--webhook-certificates=false` leaves it alone.
 */
import { afterEach, describe, expect, it } from '@jest/globals';
import type { KubernetesObject } from '@kubernetes/client-node';
import type { SecretContents } from '../../../src/controllers/webhook-certificates/execute.js';
import type {
  StoredSecret,
  WebhookCertificatesPort,
  WebhookConfigurationLike,
} from '../../../src/controllers/webhook-certificates/reconciler.js';
import {
  CERTIFICATES_LABEL,
  DNS_NAMES_ANNOTATION,
  SECRET_ANNOTATION,
} from '../../../src/controllers/webhook-certificates/request.js';
import { createOperator, type Operator } from '../../../src/operator.js';
import type { ManagerExit } from '../../../src/runtime/manager.js';
import { FakeWorld } from '../../fake-world.js';
import { operatorMetrics, settle, settleUntil, testConfig } from '../../operator-harness.js';
import { captureLogger, FakeClock, FakeInformerSource } from '../../runtime/fakes.js';

const NAME = 'kubeplus-isolation-webhook';

/** One labelled webhook configuration and its Secret; every write recorded. */
class Port implements WebhookCertificatesPort {
  secret: StoredSecret = { data: {}, annotations: {}, resourceVersion: '1' };
  readonly writes: string[] = [];
  async readSecret(): Promise<StoredSecret | undefined> {
    return structuredClone(this.secret);
  }
  async writeSecret(namespace: string, name: string, contents: SecretContents): Promise<void> {
    this.secret = { ...structuredClone(contents), resourceVersion: String(Number(this.secret.resourceVersion) + 1) };
    this.writes.push(`Secret ${namespace}/${name}`);
  }
  async writeCaBundle(configuration: WebhookConfigurationLike): Promise<void> {
    this.writes.push(`caBundle ${configuration.metadata?.name}`);
  }
}

const running: Array<{ stop: AbortController; done: Promise<ManagerExit> }> = [];

afterEach(async () => {
  for (const r of running.splice(0)) {
    r.stop.abort();
    await r.done.catch(() => undefined);
  }
});

function start(clock: FakeClock, port: Port, ...argv: string[]): Operator {
  const world = new FakeWorld();
  const configurations = new FakeInformerSource<WebhookConfigurationLike>();
  const configuration: WebhookConfigurationLike & KubernetesObject = {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'MutatingWebhookConfiguration',
    metadata: {
      name: NAME,
      resourceVersion: '1',
      labels: { [CERTIFICATES_LABEL]: 'operator' },
      annotations: {
        [SECRET_ANNOTATION]: 'kubeplus-isolation/hook-certs',
        [DNS_NAMES_ANNOTATION]: 'hook.kubeplus-isolation.svc',
      },
    },
    webhooks: [{ name: 'node-isolation.kubeplus.io', clientConfig: {} }],
  };
  configurations.objects.set(`/${NAME}`, configuration);
  const operator = createOperator({
    config: testConfig('--leader-elect=false', '--audit-interval=0', ...argv),
    logger: captureLogger('debug').logger,
    identity: 'solo',
    version: '0.0.0-test',
    policyApis: { validating: true, mutatingVersion: 'admissionregistration.k8s.io/v1' },
    sources: world.informerSources(),
    clusterPort: (options) => world.port(options, []),
    eventSink: { create: async (_n, e) => e, patch: async () => ({ involvedObject: {}, metadata: {} }) },
    leaseLock: undefined,
    webhookCertificates: { configurations, port },
    clock,
  });
  const stop = new AbortController();
  running.push({ stop, done: operator.run(stop.signal) });
  return operator;
}

describe('webhook certificates, as the operator sets them up', () => {
  it('issues a CA and a serving certificate for a labelled configuration, and reports its cache', async () => {
    const clock = new FakeClock();
    const port = new Port();
    const operator = start(clock, port);
    // Key generation runs on the thread pool, off the fake clock: wait for both writes.
    await settleUntil(clock, () => port.writes.length >= 2);
    expect(port.writes).toEqual(expect.arrayContaining([`caBundle ${NAME}`, 'Secret kubeplus-isolation/hook-certs']));
    expect(Object.keys(port.secret.data).sort()).toEqual(expect.arrayContaining(['ca.crt', 'tls.crt', 'tls.key']));
    const metrics = await operatorMetrics(operator);
    expect(metrics).toMatch(/^kubeplus_operator_informer_synced\{resource="mutatingwebhookconfigurations"\} 1$/m);
    expect(metrics).toMatch(
      /^kubeplus_operator_reconcile_total\{controller="webhook-certificates",result="(success|requeue)"\} [1-9]\d*$/m,
    );
  });

  it('--webhook-certificates=false: no controller, no cache, no write', async () => {
    const clock = new FakeClock();
    const port = new Port();
    const operator = start(clock, port, '--webhook-certificates=false');
    await settle(clock);
    expect(port.writes).toEqual([]);
    expect(operator.manager.isLeading()).toBe(true);
    const metrics = await operatorMetrics(operator);
    expect(metrics).not.toContain('mutatingwebhookconfigurations');
    expect(metrics).not.toContain('controller="webhook-certificates"');
  });
});
