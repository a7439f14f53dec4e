/**
 * Kubernetes Events about the objects the operator reconciles, like client-go's
 * `record.EventRecorder` (controller-runtime's `mgr.GetEventRecorderFor`).
 *
 * API choice: core/v1 Events. Their `count`/`firstTimestamp`/`lastTimestamp` are exactly the
 * repeat-aggregation this recorder does (client-go's legacy recorder and EventCorrelator use
 * the same fields), `kubectl describe` renders them as "(x5 over 3m)", and they need only
 * create/patch on `events` in the core group. events.k8s.io/v1 would instead need an
 * isomorphic `series` update protocol and an `eventTime`; the stored object is the same.
 *
 * Behaviour:
 * - the Event lives in the involved object's namespace (`default` for cluster-scoped objects)
 *   and is named `<object>.<hex timestamp>` as client-go names them;
 * - `reportingComponent` is `kubeplus.io/isolation-operator`, `reportingInstance` this replica;
 * - a repeat of the same (object, type, reason, message) patches `count`+`lastTimestamp` of the
 *   Event already created (a new one is created if it has expired, 404); the cache of recent
 *   Events is an LRU of bounded size (4096 entries by default, as client-go's);
 * - messages are cut to 1024 characters (the Event API's note limit);
 * - recording never throws into the caller: failures are logged. Repeats of one key are
 *   serialised so concurrent calls cannot create duplicate Events.
 */

import { createSilentLogger, describeError, type Logger } from '@kubeplus-isolation/service';
import type { CoreV1Event } from '@kubernetes/client-node';
import { type Clock, systemClock } from './clock.js';
import { isNotFound } from './errors.js';
import { LruCache } from './lru.js';

export const REPORTING_CONTROLLER = 'kubeplus.io/isolation-operator';
export const MAX_MESSAGE_LENGTH = 1024;
const MAX_REASON_LENGTH = 128;
const MAX_REPORTING_INSTANCE_LENGTH = 128;
const MAX_NAME_LENGTH = 253;

export type EventType = 'Normal' | 'Warning';

/** The object an Event is about (for instances: the custom resource). */
export interface InvolvedObject {
  apiVersion: string;
  kind: string;
  /** Empty or absent for cluster-scoped objects. */
  namespace?: string;
  name: string;
  uid?: string;
  resourceVersion?: string;
}

/** Event I/O; errors carry an HTTP status (see errors.ts). */
export interface EventSink {
  create(namespace: string, event: CoreV1Event): Promise<CoreV1Event>;
  /** Bumps the repeat count of an existing Event. */
  patch(namespace: string, name: string, update: { count: number; lastTimestamp: Date }): Promise<CoreV1Event>;
}

export interface EventRecorderOptions {
  sink: EventSink;
  /** This replica (pod name or leader-election identity); cut to 128 characters. */
  reportingInstance: string;
  reportingController?: string;
  /** Recent Events remembered for aggregation. Default 4096. */
  cacheSize?: number;
  clock?: Clock;
  logger?: Logger;
}

export interface EventRecorderLike {
  event(object: InvolvedObject, type: EventType, reason: string, message: string): Promise<void>;
}

interface Recent {
  namespace: string;
  name: string;
  count: number;
}

/** Cuts `text` to at most `max` UTF-16 units without splitting a surrogate pair. */
export function truncate(text: string, max: number): string {
  if (text.length <= max) return text;
  let end = max;
  const last = text.charCodeAt(end - 1);
  if (last >= 0xd800 && last <= 0xdbff) end--;
  return text.slice(0, end);
}

export class EventRecorder implements EventRecorderLike {
  private readonly sink: EventSink;
  private readonly reportingController: string;
  private readonly reportingInstance: string;
  private readonly recent: LruCache<string, Recent>;
  private readonly pending = new Map<string, Promise<void>>();
  private readonly clock: Clock;
  private readonly logger: Logger;
  private sequence = 0;

  constructor(options: EventRecorderOptions) {
    this.sink = options.sink;
    this.reportingController = options.reportingController ?? REPORTING_CONTROLLER;
    this.reportingInstance = truncate(options.reportingInstance, MAX_REPORTING_INSTANCE_LENGTH);
    this.recent = new LruCache(options.cacheSize ?? 4096);
    this.clock = options.clock ?? systemClock;
    this.logger = options.logger ?? createSilentLogger();
  }

  /** Records an Event. The promise settles when it is written (or given up on); it never rejects. */
  event(object: InvolvedObject, type: EventType, reason: string, message: string): Promise<void> {
    if ((type !== 'Normal' && type !== 'Warning') || !reason || !object?.name || !object.kind) {
      this.logger.warn('dropping malformed event', { type, reason, kind: object?.kind, name: object?.name });
      return Promise.resolve();
    }
    const note = truncate(String(message ?? ''), MAX_MESSAGE_LENGTH);
    const cause = truncate(reason, MAX_REASON_LENGTH);
    const key = JSON.stringify([
      object.apiVersion,
      object.kind,
      object.namespace ?? '',
      object.name,
      object.uid ?? '',
      type,
      cause,
      note,
    ]);
    const previous = this.pending.get(key) ?? Promise.resolve();
    const next = previous
      .then(() => this.write(key, object, type, cause, note))
      .catch((err: unknown) => {
        this.logger.warn('failed to record event', { error: describeError(err) });
      });
    this.pending.set(key, next);
    void next.finally(() => {
      if (this.pending.get(key) === next) this.pending.delete(key);
    });
    return next;
  }

  private async write(
    key: string,
    object: InvolvedObject,
    type: EventType,
    reason: string,
    note: string,
  ): Promise<void> {
    const now = new Date(this.clock.now());
    const fields = { kind: object.kind, namespace: object.namespace, name: object.name, reason };
    const seen = this.recent.get(key);
    if (seen) {
      try {
        await this.sink.patch(seen.namespace, seen.name, { count: seen.count + 1, lastTimestamp: now });
        seen.count++;
        return;
      } catch (err) {
        if (!isNotFound(err)) {
          this.logger.warn('failed to update event', { ...fields, error: describeError(err) });
          return;
        }
        this.recent.delete(key); // expired (events have a TTL): start a new one
      }
    }
    const namespace = object.namespace || 'default';
    const event: CoreV1Event = {
      apiVersion: 'v1',
      kind: 'Event',
      metadata: { name: this.eventName(object.name, now), namespace },
      involvedObject: {
        apiVersion: object.apiVersion,
        kind: object.kind,
        namespace: object.namespace || undefined,
        name: object.name,
        uid: object.uid,
        resourceVersion: object.resourceVersion,
      },
      type,
      reason,
      message: note,
      count: 1,
      firstTimestamp: now,
      lastTimestamp: now,
      source: { component: this.reportingController },
      reportingComponent: this.reportingController,
      reportingInstance: this.reportingInstance,
    };
    try {
      const created = await this.sink.create(namespace, event);
      this.recent.set(key, { namespace, name: created.metadata?.name ?? event.metadata.name ?? '', count: 1 });
    } catch (err) {
      this.logger.warn('failed to create event', { ...fields, error: describeError(err) });
    }
  }

  /** `<name>.<hex nanoseconds>` like client-go; a sequence number keeps same-millisecond names apart. */
  private eventName(objectName: string, now: Date): string {
    const nanos = BigInt(now.getTime()) * 1_000_000n + BigInt(this.sequence++ % 1_000_000);
    const suffix = `.${nanos.toString(16)}`;
    return truncate(objectName, MAX_NAME_LENGTH - suffix.length) + suffix;
  }
}
