/**
 * Settling the tenant namespace after a successful reconcile (issue 35): the I/O around
 * desired/settle.ts. Called by the instances controller (controller.ts) for every instance it
 * reconciles, annotated or not, so the webhook's hold releases the Pods and Sandboxes of a
 * namespace KubePlus just created once what the instance asks for is in effect there.
 *
 * Reads are cached (an already settled namespace costs nothing at a resync); a namespace the cache
 * shows unfinished is read fresh once before waiting. The sandbox policy is proven in effect by a
 * server-side dry run (never stored, and exempt from the hold: the webhook answers a dry run at
 * once); until it is, the instance is requeued after `probeRetryMs`.
 */

import type { ClusterPort } from '../../cluster/port.js';
import { decideTenantNamespace, type Instance, type InstanceKey, parseInstance } from '../../desired/instance.js';
import { planSettle, probeInEffect, type SettlePlan, settleProbe } from '../../desired/settle.js';
import { FRESH, type ReconcileLogger } from './sync-context.js';

export const SANDBOX_GROUP = 'agents.x-k8s.io';
export const DEFAULT_PROBE_RETRY_MS = 250;
/** The probe's requeue grows from probeRetryMs up to this (a policy that never takes effect must not cost a POST every 250 ms). */
export const MAX_PROBE_RETRY_MS = 30_000;
/**
 * How fast the requeue grows: 1.25× per probe, not 2×. The hold refuses after 25 s and helm does
 * not retry, so a binding that takes effect late (a loaded API server) must be seen soon after:
 * doubling would next look 4 s after a binding that took effect at 4 s, 1.25× looks within ~1 s
 * (probes at 0, 0.25, 0.56, 0.95, 1.44, 2.05, 2.81, 3.77, 4.96 s, …; 14 probes in the first 25 s).
 */
export const PROBE_RETRY_GROWTH = 1.25;
/** Probes after which a namespace still waiting is worth a warning. */
const WARN_AFTER_PROBES = 8;

export type SettlePort = Pick<
  ClusterPort,
  'getInstance' | 'getNamespace' | 'patchNamespace' | 'resolveKind' | 'servedMutatingPolicyVersion' | 'dryRunCreate'
>;

export interface SettlerOptions {
  platformNamespace: string;
  /** kubeplus-isolation's own namespace: never governed, so never settled. */
  releaseNamespace?: string;
  /** Never settled besides the system ones (e.g. the release namespace). */
  protectedNamespaces?: readonly string[];
  /** Requeue delay while the sandbox policy is not yet in effect, or node isolation not yet written. */
  probeRetryMs?: number;
  logger: ReconcileLogger;
  /** Each namespace settled, with how many probes it took (metrics). Must not throw. */
  onSettled?: (probes: number) => void;
}

export interface SettleResult {
  requeueAfterMs?: number;
}

export class Settler {
  readonly #opts: SettlerOptions;
  readonly #retryMs: number;
  /** Probes so far per namespace not yet settled (log and metric only; bounded by the namespaces waiting). */
  readonly #probes = new Map<string, number>();

  constructor(opts: SettlerOptions) {
    this.#opts = opts;
    this.#retryMs = opts.probeRetryMs ?? DEFAULT_PROBE_RETRY_MS;
  }

  async settle(port: SettlePort, key: InstanceKey): Promise<SettleResult> {
    const raw = await port.getInstance(key);
    if (raw === undefined) return {};
    const parsed = parseInstance(raw, key.plural);
    if (!parsed.ok || parsed.value.deletionTimestamp !== undefined) return {};
    const instance = parsed.value;
    const byName = this.#decide(instance, undefined);
    if (byName.decision !== 'isolate') return {};
    const name = byName.tenant.name;
    const namespace = await port.getNamespace(name);
    // The reconciler's own decision (tenant.ts): a namespace it refuses to govern (a system, the
    // release's or KubePlus's namespace, or one not created for this instance) is never settled.
    if (this.#decide(instance, namespace).decision !== 'isolate') return {};
    let plan = this.#plan(instance, name, namespace);
    // The cache may not show this reconcile's own write yet: read once more, fresh.
    if (plan.action === 'wait') plan = this.#plan(instance, name, await port.getNamespace(name, FRESH));
    switch (plan.action) {
      case 'skip':
        this.#probes.delete(name);
        return {};
      case 'wait':
        // Read fresh: this reconcile did not write the keys (a conflict, a refusal). Waiting would
        // not bring them; the next event of the instance or its namespace reconciles it again.
        this.#opts.logger.debug('tenant namespace not settled: its node isolation is not written', { namespace: name });
        return {};
      case 'probe': {
        const probes = (this.#probes.get(name) ?? 0) + 1;
        this.#probes.set(name, probes);
        const answer = await this.#inEffect(port, name, plan.enforce);
        if (answer !== true) {
          const fields = { namespace: name, probes, answer };
          if (probes === WARN_AFTER_PROBES) {
            this.#opts.logger.warn('tenant namespace still not settled: its sandbox policy is not in effect', fields);
          } else {
            this.#opts.logger.debug('tenant namespace not settled yet: sandbox policy not yet in effect', fields);
          }
          return {
            requeueAfterMs: Math.min(
              MAX_PROBE_RETRY_MS,
              Math.round(this.#retryMs * PROBE_RETRY_GROWTH ** Math.min(probes - 1, 40)),
            ),
          };
        }
        break;
      }
      case 'settle':
        break;
    }
    await port.patchNamespace(name, plan.patch);
    const probes = this.#probes.get(name) ?? 0;
    this.#probes.delete(name);
    this.#opts.onSettled?.(probes);
    this.#opts.logger.info('tenant namespace settled', {
      namespace: name,
      instance: `${key.namespace}/${key.name}`,
      probes,
    });
    return {};
  }

  #decide(instance: Instance, namespace: Awaited<ReturnType<SettlePort['getNamespace']>>) {
    const { platformNamespace, releaseNamespace } = this.#opts;
    return decideTenantNamespace({
      instance,
      platformNamespace,
      ...(releaseNamespace === undefined ? {} : { releaseNamespace }),
      namespace,
    });
  }

  #plan(instance: Instance, tenant: string, namespace: Awaited<ReturnType<SettlePort['getNamespace']>>): SettlePlan {
    return planSettle({
      instance,
      tenant,
      namespace,
      protectedNamespaces: [
        this.#opts.platformNamespace,
        ...(this.#opts.releaseNamespace === undefined ? [] : [this.#opts.releaseNamespace]),
        ...(this.#opts.protectedNamespaces ?? []),
      ],
    });
  }

  /** true when the policy is in effect, else what the probe got (for the log). */
  async #inEffect(port: SettlePort, namespace: string, enforce: boolean): Promise<true | string> {
    const kind = await port.resolveKind(SANDBOX_GROUP, 'Sandbox');
    if (kind === undefined) return true; // no Sandbox can be created: nothing to wait for
    const [answer, mutating] = await Promise.all([
      port.dryRunCreate(settleProbe(`${kind.group}/${kind.version}`, namespace)),
      enforce ? Promise.resolve(undefined) : port.servedMutatingPolicyVersion(),
    ]);
    if (probeInEffect(answer, enforce, mutating !== undefined)) return true;
    if ('notServed' in answer) return 'not served';
    return answer.allowed ? 'admitted' : `refused ${answer.code}: ${answer.message.slice(0, 200)}`;
  }
}
