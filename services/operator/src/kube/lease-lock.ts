/**
 * `LeaseLock` on a real coordination.k8s.io/v1 Lease through client-node's CoordinationV1Api
 * (client-go's `resourcelock.LeaseLock`). Updates are PUTs carrying the resourceVersion that
 * was read, so concurrent writers get 409 Conflict; labels, annotations and owner references
 * of the Lease are preserved.
 *
 * The holder's writes can also carry annotations of its own (`carryAnnotation`: the audit's Pod
 * watch position, issue 34) at no extra request: each renewal (every retry period) and the release
 * write the value current at that moment. The write that takes the Lease over never does, so what
 * the previous holder left survives into the new term, which reads it from `takenFrom()`.
 */
import { type CoordinationV1Api, type V1Lease, type V1LeaseSpec, V1MicroTime } from '@kubernetes/client-node';
import { isNotFound } from '../runtime/errors.js';
import type { LeaderElectionRecord, LeaseLock, ObservedLease } from '../runtime/leader-election.js';
import { requestOptions } from './request.js';

function toDate(value: unknown): Date | undefined {
  if (value instanceof Date) return Number.isNaN(value.getTime()) ? undefined : value;
  if (typeof value !== 'string') return undefined;
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? undefined : date;
}

function nonNegativeInt(value: unknown): number {
  return typeof value === 'number' && Number.isInteger(value) && value >= 0 ? value : 0;
}

/** Lease spec → record. Missing or malformed fields read as "unheld/expired", never throw. */
export function recordFromSpec(spec: V1LeaseSpec | undefined): LeaderElectionRecord {
  return {
    holderIdentity: typeof spec?.holderIdentity === 'string' ? spec.holderIdentity : '',
    leaseDurationSeconds: nonNegativeInt(spec?.leaseDurationSeconds),
    acquireTime: toDate(spec?.acquireTime),
    renewTime: toDate(spec?.renewTime),
    leaseTransitions: nonNegativeInt(spec?.leaseTransitions),
  };
}

/** Record → Lease spec, with MicroTime (microsecond RFC 3339) timestamps as the API requires. */
export function specFromRecord(record: LeaderElectionRecord): V1LeaseSpec {
  const spec: V1LeaseSpec = {
    holderIdentity: record.holderIdentity,
    leaseDurationSeconds: record.leaseDurationSeconds,
    leaseTransitions: record.leaseTransitions,
  };
  if (record.acquireTime) spec.acquireTime = new V1MicroTime(record.acquireTime.getTime());
  if (record.renewTime) spec.renewTime = new V1MicroTime(record.renewTime.getTime());
  return spec;
}

/** The Lease as this replica found it when it last took it: `existed: false` when it created it. */
export type TakenLease =
  | { existed: false }
  | {
      existed: true;
      record: LeaderElectionRecord;
      annotations: Record<string, string>;
      createdAt: Date | undefined;
    };

export class KubeLeaseLock implements LeaseLock {
  readonly description: string;
  private lastRead: V1Lease | undefined;
  private taken: TakenLease | undefined;
  private readonly carried = new Map<string, () => string | undefined>();

  constructor(
    private readonly api: CoordinationV1Api,
    readonly namespace: string,
    readonly name: string,
  ) {
    this.description = `${namespace}/${name}`;
  }

  /**
   * Makes the holder's renewals and its release write annotation `key` = `value()`, read at each
   * write (undefined: left as it is). Never the write that takes the Lease over.
   */
  carryAnnotation(key: string, value: () => string | undefined): void {
    this.carried.set(key, value);
  }

  /** The Lease as it was just before this replica's write that made it the holder; undefined before any. */
  takenFrom(): TakenLease | undefined {
    return this.taken;
  }

  async get(signal: AbortSignal): Promise<ObservedLease | undefined> {
    try {
      const lease = await this.api.readNamespacedLease(
        { name: this.name, namespace: this.namespace },
        requestOptions({ signal }),
      );
      this.lastRead = lease;
      return this.observe(lease);
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  async create(record: LeaderElectionRecord, signal: AbortSignal): Promise<ObservedLease> {
    const lease = await this.api.createNamespacedLease(
      {
        namespace: this.namespace,
        body: {
          apiVersion: 'coordination.k8s.io/v1',
          kind: 'Lease',
          metadata: { name: this.name, namespace: this.namespace },
          spec: specFromRecord(record),
        },
      },
      requestOptions({ signal }),
    );
    this.lastRead = lease;
    this.taken = { existed: false };
    return this.observe(lease);
  }

  async update(record: LeaderElectionRecord, resourceVersion: string, signal: AbortSignal): Promise<ObservedLease> {
    const read = this.lastRead;
    const previous = read?.metadata;
    const holder = typeof read?.spec?.holderIdentity === 'string' ? read.spec.holderIdentity : '';
    // A renewal keeps the holder; a release (holder "") is only written by the holder.
    const byHolder = holder !== '' && (record.holderIdentity === holder || record.holderIdentity === '');
    const takingOver = record.holderIdentity !== '' && record.holderIdentity !== holder;
    const annotations = byHolder ? this.withCarried(previous?.annotations) : previous?.annotations;
    const lease = await this.api.replaceNamespacedLease(
      {
        name: this.name,
        namespace: this.namespace,
        body: {
          apiVersion: 'coordination.k8s.io/v1',
          kind: 'Lease',
          metadata: {
            name: this.name,
            namespace: this.namespace,
            resourceVersion,
            labels: previous?.labels,
            annotations,
            ownerReferences: previous?.ownerReferences,
          },
          spec: specFromRecord(record),
        },
      },
      requestOptions({ signal }),
    );
    if (takingOver) {
      this.taken = {
        existed: true,
        record: recordFromSpec(read?.spec),
        annotations: { ...previous?.annotations },
        createdAt: toDate(previous?.creationTimestamp),
      };
    }
    this.lastRead = lease;
    return this.observe(lease);
  }

  private withCarried(annotations: Record<string, string> | undefined): Record<string, string> | undefined {
    let out = annotations;
    for (const [key, value] of this.carried) {
      let v: string | undefined;
      try {
        v = value();
      } catch {
        v = undefined; // never let a carried value fail a renewal
      }
      if (v !== undefined) out = { ...out, [key]: v };
    }
    return out;
  }

  private observe(lease: V1Lease): ObservedLease {
    return { record: recordFromSpec(lease.spec), resourceVersion: lease.metadata?.resourceVersion ?? '' };
  }
}
