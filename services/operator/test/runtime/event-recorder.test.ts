import { describe, expect, it } from '@jest/globals';
import type { CoreV1Event } from '@kubernetes/client-node';
import {
  EventRecorder,
  type EventSink,
  type InvolvedObject,
  MAX_MESSAGE_LENGTH,
  REPORTING_CONTROLLER,
  truncate,
} from '../../src/runtime/event-recorder.js';
import { captureLogger, deferred, FakeClock, flush, HttpError } from './fakes.js';

class FakeSink implements EventSink {
  readonly created: Array<{ namespace: string; event: CoreV1Event }> = [];
  readonly patched: Array<{ namespace: string; name: string; count: number; lastTimestamp: Date }> = [];
  createError: unknown;
  patchError: unknown;
  gate: Promise<void> | undefined;

  async create(namespace: string, event: CoreV1Event): Promise<CoreV1Event> {
    await this.gate;
    if (this.createError) throw this.createError;
    this.created.push({ namespace, event });
    return event;
  }

  async patch(namespace: string, name: string, update: { count: number; lastTimestamp: Date }): Promise<CoreV1Event> {
    if (this.patchError) throw this.patchError;
    this.patched.push({ namespace, name, ...update });
    return { metadata: { name }, involvedObject: {} };
  }
}

const agent: InvolvedObject = {
  apiVersion: 'cloudark.io/v1',
  kind: 'Agent',
  namespace: 'team-a',
  name: 'team-a-agent-instance',
  uid: '1f1f1f1f-0000-4000-8000-000000000001',
};

function recorder(sink: FakeSink, clock = new FakeClock(), cacheSize?: number) {
  const { logger, lines } = captureLogger();
  return { rec: new EventRecorder({ sink, reportingInstance: 'operator-0', clock, cacheSize, logger }), lines, clock };
}

describe('EventRecorder', () => {
  it('creates a core/v1 Event on the involved object, in its namespace', async () => {
    const sink = new FakeSink();
    const { rec, clock } = recorder(sink);
    await rec.event(agent, 'Normal', 'IsolationApplied', 'namespace team-a labelled');
    expect(sink.created).toHaveLength(1);
    const { namespace, event } = sink.created[0] ?? { namespace: '', event: undefined };
    expect(namespace).toBe('team-a');
    expect(event).toMatchObject({
      metadata: { namespace: 'team-a' },
      involvedObject: {
        apiVersion: 'cloudark.io/v1',
        kind: 'Agent',
        namespace: 'team-a',
        name: 'team-a-agent-instance',
        uid: agent.uid,
      },
      type: 'Normal',
      reason: 'IsolationApplied',
      message: 'namespace team-a labelled',
      count: 1,
      firstTimestamp: new Date(clock.now()),
      lastTimestamp: new Date(clock.now()),
      reportingComponent: REPORTING_CONTROLLER,
      reportingInstance: 'operator-0',
      source: { component: REPORTING_CONTROLLER },
    });
    expect(event?.metadata.name).toMatch(/^team-a-agent-instance\.[0-9a-f]+$/);
  });

  it('aggregates a repeat by patching count and lastTimestamp instead of creating another Event', async () => {
    const sink = new FakeSink();
    const { rec, clock } = recorder(sink);
    await rec.event(agent, 'Warning', 'InvalidAnnotation', 'bad JSON');
    await clock.advance(60_000);
    await rec.event(agent, 'Warning', 'InvalidAnnotation', 'bad JSON');
    await clock.advance(60_000);
    await rec.event(agent, 'Warning', 'InvalidAnnotation', 'bad JSON');
    expect(sink.created).toHaveLength(1);
    const name = sink.created[0]?.event.metadata.name;
    expect(sink.patched).toEqual([
      { namespace: 'team-a', name, count: 2, lastTimestamp: new Date(clock.now() - 60_000) },
      { namespace: 'team-a', name, count: 3, lastTimestamp: new Date(clock.now()) },
    ]);
  });

  it('creates separate Events for a different message, reason, type or object', async () => {
    const sink = new FakeSink();
    const { rec } = recorder(sink);
    await rec.event(agent, 'Warning', 'InvalidAnnotation', 'bad JSON');
    await rec.event(agent, 'Warning', 'InvalidAnnotation', 'unknown field');
    await rec.event(agent, 'Warning', 'ApplyFailed', 'bad JSON');
    await rec.event(agent, 'Normal', 'InvalidAnnotation', 'bad JSON');
    await rec.event({ ...agent, name: 'other' }, 'Warning', 'InvalidAnnotation', 'bad JSON');
    expect(sink.created).toHaveLength(5);
    expect(sink.patched).toHaveLength(0);
    expect(new Set(sink.created.map((c) => c.event.metadata.name)).size).toBe(5);
  });

  it('serialises concurrent repeats: one create, then patches', async () => {
    const sink = new FakeSink();
    const gate = deferred();
    sink.gate = gate.promise;
    const { rec } = recorder(sink);
    const all = [1, 2, 3].map(() => rec.event(agent, 'Normal', 'Synced', 'ok'));
    gate.resolve();
    await Promise.all(all);
    expect(sink.created).toHaveLength(1);
    expect(sink.patched.map((p) => p.count)).toEqual([2, 3]);
  });

  it('truncates messages to 1024 characters', async () => {
    const sink = new FakeSink();
    const { rec } = recorder(sink);
    await rec.event(agent, 'Warning', 'InvalidAnnotation', 'x'.repeat(5000));
    expect(sink.created[0]?.event.message).toHaveLength(MAX_MESSAGE_LENGTH);
  });

  it('keeps its memory bounded: evicted entries start a new Event', async () => {
    const sink = new FakeSink();
    const { rec } = recorder(sink, new FakeClock(), 2);
    await rec.event(agent, 'Normal', 'R', 'one');
    await rec.event(agent, 'Normal', 'R', 'two');
    await rec.event(agent, 'Normal', 'R', 'three'); // evicts "one"
    await rec.event(agent, 'Normal', 'R', 'three');
    await rec.event(agent, 'Normal', 'R', 'one');
    expect(sink.created.map((c) => c.event.message)).toEqual(['one', 'two', 'three', 'one']);
    expect(sink.patched).toHaveLength(1);
  });

  it('creates a fresh Event when the aggregated one has expired (404 on patch)', async () => {
    const sink = new FakeSink();
    const { rec } = recorder(sink);
    await rec.event(agent, 'Normal', 'Synced', 'ok');
    sink.patchError = new HttpError(404);
    await rec.event(agent, 'Normal', 'Synced', 'ok');
    expect(sink.created).toHaveLength(2);
    expect(sink.created[1]?.event.count).toBe(1);
  });

  it('never rejects: API failures are logged', async () => {
    const sink = new FakeSink();
    const { rec, lines } = recorder(sink);
    sink.createError = new HttpError(403, 'events is forbidden');
    await expect(rec.event(agent, 'Normal', 'Synced', 'ok')).resolves.toBeUndefined();
    sink.createError = undefined;
    await rec.event(agent, 'Normal', 'Synced', 'ok');
    sink.patchError = new HttpError(500);
    await expect(rec.event(agent, 'Normal', 'Synced', 'ok')).resolves.toBeUndefined();
    await flush();
    expect(lines().map((l) => [l.level, l.msg])).toEqual([
      ['warn', 'failed to create event'],
      ['warn', 'failed to update event'],
    ]);
  });

  it('drops malformed input without calling the API or throwing', async () => {
    const sink = new FakeSink();
    const { rec } = recorder(sink);
    await rec.event(agent, 'Bogus' as never, 'R', 'm');
    await rec.event(agent, 'Normal', '', 'm');
    await rec.event({ ...agent, name: '' }, 'Normal', 'R', 'm');
    await rec.event(undefined as never, 'Normal', 'R', 'm');
    expect(sink.created).toHaveLength(0);
  });

  it('puts Events about cluster-scoped objects in "default"', async () => {
    const sink = new FakeSink();
    const { rec } = recorder(sink);
    await rec.event(
      { apiVersion: 'node.k8s.io/v1', kind: 'RuntimeClass', name: 'kubeplus-sandbox-x' },
      'Normal',
      'R',
      'm',
    );
    expect(sink.created[0]?.namespace).toBe('default');
    expect(sink.created[0]?.event.involvedObject.namespace).toBeUndefined();
  });

  it('keeps Event names within 253 characters for long object names', async () => {
    const sink = new FakeSink();
    const { rec } = recorder(sink);
    await rec.event({ ...agent, name: 'n'.repeat(253) }, 'Normal', 'R', 'm');
    expect(sink.created[0]?.event.metadata.name?.length).toBeLessThanOrEqual(253);
  });
});

describe('truncate', () => {
  it('never splits a surrogate pair', () => {
    expect(truncate('ab😀', 3)).toBe('ab');
    expect(truncate('abc', 3)).toBe('abc');
  });
});
