/**
 * What a host snapshot (e2e/src/harness/node/host-state.ts) makes of the machine-wide kubelet
 * sysctl record (host-sysctls.ts). `make test` runs two jest runs at once, each starting real
 * nodes; a snapshot must show this run's traces and the host's own state, never another run's.
 * CI once failed "stopping the node leaves the host exactly as it was" because the snapshot before
 * the node started counted a record that was not this run's (another run's, read between two
 * separate looks at it, or a SIGKILLed run's) and the one after did not.
 */
import { describe, expect, test } from '@jest/globals';
import { sysctlView } from '../../src/harness/node/host-sysctls.js';

const SELF = 1000;
const current = { 'vm/overcommit_memory': '1', 'kernel/panic': '10' };
const originals = { 'vm/overcommit_memory': '0', 'kernel/panic': '0' };
const record = (holders: number[]): string => JSON.stringify({ originals, holders });
const aliveOnly =
  (...pids: number[]) =>
  (pid: number): boolean =>
    pids.includes(pid);

describe('a snapshot of the kubelet sysctls and their shared record', () => {
  test('no record: the current values, and no trace', () => {
    expect(sysctlView('', current, SELF, aliveOnly())).toEqual({ values: current, recordIsTrace: false });
  });

  test('this run holds it: the current values, and the record is its trace', () => {
    expect(sysctlView(record([SELF]), current, SELF, aliveOnly())).toEqual({ values: current, recordIsTrace: true });
  });

  test('another live run holds it (alone or beside this one): neither values nor record', () => {
    expect(sysctlView(record([2000]), current, SELF, aliveOnly(2000))).toEqual({
      values: undefined,
      recordIsTrace: false,
    });
    expect(sysctlView(record([SELF, 2000]), current, SELF, aliveOnly(2000))).toEqual({
      values: undefined,
      recordIsTrace: false,
    });
  });

  test("every holder dead (a run SIGKILLed with its watchdogs): the recorded originals, and the record is not this run's", () => {
    expect(sysctlView(record([2000, 3000]), current, SELF, aliveOnly(SELF))).toEqual({
      values: originals,
      recordIsTrace: false,
    });
  });

  test('a record no one holds, or one that does not parse, is a trace (nothing writes either)', () => {
    expect(sysctlView(record([]), current, SELF, aliveOnly())).toEqual({ values: current, recordIsTrace: true });
    expect(sysctlView('{"originals":', current, SELF, aliveOnly())).toEqual({ values: current, recordIsTrace: true });
  });
});
