/**
 * HTTP load with autocannon (keep-alive, fixed number of connections, one request in flight per
 * connection). autocannon's own latency histogram has 1 ms resolution, too coarse for a webhook
 * answering in well under a millisecond, so every response time (float ms, autocannon's own
 * hrtime measurement) is collected from its `response` event and percentiles are computed exactly.
 */
import autocannon from 'autocannon';
import { cpuSeconds } from './proc.js';
import { type Percentiles, percentiles } from './stats.js';

export interface LoadOptions {
  url: string;
  /** Request bodies; with more than one, each request takes the next (round robin). */
  bodies: readonly string[];
  /**
   * Build every request in setupRequest even for one body, so runs that compare one body with
   * many cost the load generator the same per request.
   */
  perRequestSetup?: boolean;
  connections: number;
  durationSeconds: number;
  /** The server's pid: its CPU time over the run is measured. */
  serverPid?: number;
}

export interface LoadResult {
  requests: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  durationSeconds: number;
  /** 2xx responses per second. */
  rps: number;
  latencyMs: Percentiles;
  /** Server CPU seconds used during the run (user + system, all threads). */
  serverCpuSeconds?: number;
  /** 2xx responses per server CPU-second: the throughput of one fully available core. */
  perCpuSecond?: number;
}

export async function runLoad(opts: LoadOptions): Promise<LoadResult> {
  const times: number[] = [];
  const { bodies } = opts;
  let next = 0;
  const cpu0 = opts.serverPid === undefined ? 0 : cpuSeconds(opts.serverPid);
  const started = process.hrtime.bigint();
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    const instance = autocannon(
      {
        url: opts.url,
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        connections: opts.connections,
        pipelining: 1,
        duration: opts.durationSeconds,
        timeout: 10,
        ...(bodies.length === 1 && !opts.perRequestSetup
          ? { body: bodies[0] }
          : {
              requests: [
                {
                  setupRequest: (req: autocannon.Request) => {
                    const body = bodies[next++ % bodies.length] as string;
                    return { ...req, body };
                  },
                },
              ],
            }),
      },
      (err, res) => (err ? reject(err) : resolve(res)),
    );
    instance.on('response', (_client: unknown, statusCode: number, _bytes: number, responseTime: number) => {
      if (statusCode >= 200 && statusCode < 300) times.push(responseTime);
    });
  });
  const elapsed = Number(process.hrtime.bigint() - started) / 1e9;
  const cpu = opts.serverPid === undefined ? undefined : cpuSeconds(opts.serverPid) - cpu0;
  const durationSeconds = Math.min(elapsed, opts.durationSeconds + 0.5);
  const ok = times.length;
  return {
    requests: result.requests.total,
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    durationSeconds: result.duration || durationSeconds,
    rps: ok / (result.duration || durationSeconds),
    latencyMs: percentiles(times),
    ...(cpu !== undefined && { serverCpuSeconds: cpu, perCpuSecond: cpu > 0 ? ok / cpu : Number.NaN }),
  };
}
