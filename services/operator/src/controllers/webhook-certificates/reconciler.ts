/**
 * The webhook-certificates reconciler, keyed by the name of a labelled
 * MutatingWebhookConfiguration: read the Secret fresh, decide (`planCertificates`), carry the
 * plan out (`executePlan`), write the Secret once, then bring every webhook entry's caBundle to
 * the Secret's trust bundle. Level-triggered and idempotent: a reconcile on an up-to-date pair
 * reads one Secret and writes nothing; it asks to be called again at the next deadline.
 */
import { createSilentLogger, describeError, type Logger } from '@kubeplus-isolation/service';
import type { KubernetesObject } from '@kubernetes/client-node';
import { type Clock, systemClock } from '../../runtime/clock.js';
import type { Lister } from '../../runtime/informer.js';
import type { Reconciler } from '../../runtime/manager.js';
import type { ReconcileOutcome } from '../../runtime/worker-pool.js';
import { caBundleOf, executePlan, type Issuer, type SecretContents } from './execute.js';
import { type CertificatePolicy, isNoop, MIN_REQUEUE_MS, planCertificates } from './policy.js';
import { certificateRequest } from './request.js';
import { bundleFingerprints, readTlsState, type TlsState } from './state.js';

export const WEBHOOK_CERTIFICATES_CONTROLLER = 'webhook-certificates';

export interface StoredSecret extends SecretContents {
  resourceVersion: string | undefined;
}

/** A webhook configuration as the reconciler reads it. */
export interface WebhookConfigurationLike extends KubernetesObject {
  webhooks?: Array<{ name?: string; clientConfig?: { caBundle?: string } }>;
}

/** The reconciler's API calls (kube/webhook-certificates-port.ts). Errors carry the HTTP status. */
export interface WebhookCertificatesPort {
  readSecret(namespace: string, name: string): Promise<StoredSecret | undefined>;
  /** Makes data and annotations `contents` (keys of `previous` not in it are removed); 409 if the Secret changed since `previous` was read. */
  writeSecret(namespace: string, name: string, contents: SecretContents, previous: StoredSecret): Promise<void>;
  /** Sets `caBundle` on every webhook entry; 409 if the configuration changed since it was read. */
  writeCaBundle(configuration: WebhookConfigurationLike, caBundle: string): Promise<void>;
}

export interface WebhookCertificatesHooks {
  issued(kind: 'ca' | 'serving'): void;
  expiries(configuration: string, state: TlsState | undefined): void;
  invalidConfiguration(configuration: string, invalid: boolean): void;
}

export interface WebhookCertificatesOptions {
  port: WebhookCertificatesPort;
  configurations: Lister<WebhookConfigurationLike>;
  policy: CertificatePolicy;
  hooks?: WebhookCertificatesHooks;
  issuer?: Issuer;
  logger?: Logger;
  clock?: Clock;
}

/** Fingerprints every entry's caBundle holds (a CA trusted by only some entries is not trusted). */
export function trustedByAll(configuration: WebhookConfigurationLike): Set<string> {
  const entries = configuration.webhooks ?? [];
  if (entries.length === 0) return new Set();
  const [first, ...rest] = entries.map((w) => bundleFingerprints(w.clientConfig?.caBundle));
  return new Set([...(first ?? [])].filter((fp) => rest.every((s) => s.has(fp))));
}

export class WebhookCertificatesReconciler implements Reconciler {
  readonly name = WEBHOOK_CERTIFICATES_CONTROLLER;
  private readonly logger: Logger;
  private readonly clock: Clock;
  /** The errors last logged per configuration, so an invalid one is reported once per change. */
  private readonly reported = new Map<string, string>();

  constructor(private readonly options: WebhookCertificatesOptions) {
    this.logger = (options.logger ?? createSilentLogger()).child({ controller: WEBHOOK_CERTIFICATES_CONTROLLER });
    this.clock = options.clock ?? systemClock;
  }

  async reconcile(name: string, signal: AbortSignal): Promise<ReconcileOutcome> {
    const { port, hooks } = this.options;
    const configuration = this.options.configurations.get(name);
    if (configuration === undefined) {
      this.reported.delete(name);
      hooks?.expiries(name, undefined);
      hooks?.invalidConfiguration(name, false);
      return;
    }
    const request = certificateRequest(configuration);
    if (!request.ok) {
      const text = request.errors.join('; ');
      if (this.reported.get(name) !== text) {
        this.reported.set(name, text);
        this.logger.error('webhook configuration asks for certificates but says not for what; nothing issued', {
          webhookConfiguration: name,
          errors: request.errors,
        });
      }
      hooks?.invalidConfiguration(name, true);
      return;
    }
    this.reported.delete(name);
    hooks?.invalidConfiguration(name, false);
    const { secret: ref } = request.value;
    const fields = { webhookConfiguration: name, secret: `${ref.namespace}/${ref.name}` };

    const stored = await port.readSecret(ref.namespace, ref.name);
    if (stored === undefined) {
      throw new Error(
        `Secret ${ref.namespace}/${ref.name} (named by webhook configuration ${name}) does not exist: the chart creates it, the operator fills it`,
      );
    }
    if (signal.aborted) throw signal.reason;
    const now = this.clock.now();
    const state = readTlsState(stored.data, stored.annotations);
    const plan = planCertificates(state, request.value, this.options.policy, now, trustedByAll(configuration));
    let contents: SecretContents = stored;
    let wrote = false;
    if (!isNoop(plan, state)) {
      contents = await executePlan({
        state,
        current: stored,
        plan,
        wanted: request.value,
        policy: this.options.policy,
        now,
        caCommonName: `${name}-ca`,
        issuer: this.options.issuer,
      });
      if (signal.aborted) throw signal.reason;
      await port.writeSecret(ref.namespace, ref.name, contents, stored);
      wrote = true;
      if (plan.signer === 'new' || plan.addNext) hooks?.issued('ca');
      if (plan.issueLeaf) hooks?.issued('serving');
      this.logger.info('webhook certificates updated', {
        ...fields,
        reasons: plan.reasons,
        signer: plan.signer,
        nextCa: plan.addNext,
        servingCertificate: plan.issueLeaf,
      });
    }
    // The Secret as it now is: what was written, else what was read (parsed once).
    const current = contents === stored ? state : readTlsState(contents.data, contents.annotations);
    const caBundle = caBundleOf(contents);
    const stale = (configuration.webhooks ?? []).some((w) => w.clientConfig?.caBundle !== caBundle);
    if (stale) {
      if (signal.aborted) throw signal.reason;
      try {
        await port.writeCaBundle(configuration, caBundle);
      } catch (err) {
        this.logger.warn('could not write the caBundle (retried)', { ...fields, error: describeError(err) });
        throw err;
      }
      wrote = true;
      this.logger.info('webhook configuration caBundle updated', { ...fields, cas: current.cas.length });
    }
    hooks?.expiries(name, current);
    // After a write, look again at once: the next decision is made on what was written.
    return { requeueAfterMs: wrote ? MIN_REQUEUE_MS : plan.requeueAfterMs };
  }
}
