/**
 * Talking to a running webhook directly (as the API server does): AdmissionReviews over HTTPS,
 * trusting only the cluster CA, on keep-alive connections; and a load of many such clients
 * whose every outcome is recorded, so a suite can say exactly which request failed and how.
 */
import { randomUUID, X509Certificate } from 'node:crypto';
import { Agent, request } from 'node:https';
import type { TLSSocket } from 'node:tls';
import { ADMISSION_REVIEW_API_VERSION, ADMISSION_REVIEW_KIND } from '@kubeplus-isolation/spec';

export interface ReviewReply {
  status: number;
  /** The `Connection` response header (`close` while the webhook drains). */
  connection: string | undefined;
  body: {
    response?: { uid?: string; allowed?: boolean; patch?: string; warnings?: string[] };
    error?: string;
    message?: string;
  };
  /** SHA-256 fingerprint of the serving certificate this request's connection was made with. */
  fingerprint256: string;
  reusedSocket: boolean;
}

/** A Pod CREATE AdmissionReview as the API server sends it. */
export function podReview(namespace: string, name: string, uid = randomUUID()): Record<string, unknown> {
  const pod = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace },
    spec: { containers: [{ name: 'main', image: 'registry.k8s.io/pause:3.10' }] },
  };
  const gvk = { group: '', version: 'v1', kind: 'Pod' };
  const gvr = { group: '', version: 'v1', resource: 'pods' };
  return {
    apiVersion: ADMISSION_REVIEW_API_VERSION,
    kind: ADMISSION_REVIEW_KIND,
    request: {
      uid,
      kind: gvk,
      resource: gvr,
      requestKind: gvk,
      requestResource: gvr,
      name,
      namespace,
      operation: 'CREATE',
      userInfo: { username: 'kubeplus-e2e-faults' },
      object: pod,
      dryRun: false,
    },
  };
}

/** The JSON patch of a reply, decoded ([] when there is none). */
export function patchOf(reply: ReviewReply): { op: string; path: string; value?: unknown }[] {
  const b64 = reply.body.response?.patch;
  return b64 === undefined ? [] : (JSON.parse(Buffer.from(b64, 'base64').toString('utf8')) as []);
}

export interface PostOptions {
  /** Connection pool (keep-alive); default: a new connection for this request. */
  agent?: Agent;
  /** Written in chunks over this long (a slow client), so the request is in flight that long. */
  uploadMs?: number;
  timeoutMs?: number;
}

/** POSTs a review to `url` (…/mutate/pods), verifying the server with `caPem`. */
export function postReview(
  url: string,
  caPem: string,
  review: Record<string, unknown>,
  opts: PostOptions = {},
): Promise<ReviewReply> {
  const target = new URL(url);
  const payload = Buffer.from(JSON.stringify(review));
  return new Promise((resolve, reject) => {
    let fingerprint256 = '';
    // How far the request got before an error: the TLS connection established, the request fully sent.
    const progress = { secured: false, sent: false };
    const fail = (error: Error): void => {
      reject(Object.assign(error, { progress: { ...progress } }));
    };
    const req = request(
      {
        host: target.hostname,
        port: target.port,
        path: `${target.pathname}?timeout=5s`,
        method: 'POST',
        ca: caPem,
        agent: opts.agent ?? false,
        headers: { 'content-type': 'application/json', 'content-length': String(payload.length) },
        timeout: opts.timeoutMs ?? 15_000,
      },
      (res) => {
        // The certificate the server presented on this connection (at its handshake).
        fingerprint256 = (res.socket as TLSSocket).getPeerCertificate().fingerprint256 ?? '';
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let body: ReviewReply['body'];
          try {
            body = JSON.parse(text) as ReviewReply['body'];
          } catch {
            reject(new Error(`HTTP ${res.statusCode}: response is not JSON: ${text.slice(0, 200)}`));
            return;
          }
          resolve({
            status: res.statusCode ?? 0,
            connection: res.headers.connection,
            body,
            fingerprint256,
            reusedSocket: req.reusedSocket,
          });
        });
      },
    );
    req.on('socket', (socket) => {
      const tlsSocket = socket as TLSSocket;
      // A reused keep-alive socket is already secure; a new one reports when it is.
      if (tlsSocket.encrypted && !tlsSocket.connecting) progress.secured = true;
      else
        tlsSocket.once('secureConnect', () => {
          progress.secured = true;
        });
    });
    req.on('finish', () => {
      progress.sent = true;
    });
    req.on('timeout', () => req.destroy(new Error(`no response within ${opts.timeoutMs ?? 15_000} ms`)));
    req.on('error', fail);
    if (opts.uploadMs === undefined || opts.uploadMs <= 0) {
      req.end(payload);
      return;
    }
    // Slow client: the body in ten pieces spread over uploadMs.
    const pieces = 10;
    const size = Math.ceil(payload.length / pieces);
    let i = 0;
    const next = (): void => {
      const chunk = payload.subarray(i * size, (i + 1) * size);
      i += 1;
      if (i >= pieces) req.end(chunk);
      else {
        req.write(chunk);
        setTimeout(next, (opts.uploadMs as number) / pieces);
      }
    };
    next();
  });
}

/** GET over HTTPS (e.g. /readyz), trusting `caPem`, on a new connection. */
export function getStatus(url: string, caPem: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { ca: caPem, agent: false, timeout: 5_000 }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => {
        body += c.toString();
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`GET ${url}: no answer within 5 s`)));
    req.on('error', reject);
    req.end();
  });
}

export function fingerprintOf(certPem: string): string {
  return new X509Certificate(certPem).fingerprint256;
}

/** One request of a load run: when it was sent and answered, and how it ended. */
export interface Outcome {
  client: number;
  seq: number;
  startedAt: number;
  endedAt: number;
  /**
   * ok: 200 with an allowed review for the request's uid that passes `check`.
   * not-accepted: the connection was refused or reset before TLS was established — nothing of
   * the request was sent (e.g. the listener closed with the connection still in the kernel's
   * accept queue).
   * failed: anything else — an error once the request was on an established connection, a
   * non-200, a wrong answer.
   */
  result: 'ok' | 'not-accepted' | 'failed';
  detail: string;
  reply?: ReviewReply;
}

export interface LoadOptions {
  url: string;
  caPem: string;
  namespace: string;
  clients: number;
  /** Keep-alive connection per client (default true); false: a new TLS connection per request. */
  keepAlive?: boolean;
  /** Called on each 200 reply; return a problem to count it as failed (e.g. a missing patch). */
  check?: (reply: ReviewReply) => string | undefined;
  /** A client stops after its first connection that was not accepted (the webhook no longer listens). */
  stopOnRefused?: boolean;
}

export interface Load {
  outcomes: Outcome[];
  /** Stops issuing new requests and resolves once every client's last request has ended. */
  stop(): Promise<void>;
  /** Resolves once every client has ended by itself (stopOnRefused) or after stop(). */
  done: Promise<void>;
}

/**
 * `clients` concurrent clients, each POSTing reviews back to back until stopped. Every outcome is
 * kept and classified (see Outcome.result).
 */
export function startLoad(o: LoadOptions): Load {
  const outcomes: Outcome[] = [];
  let stopped = false;
  const agents: Agent[] = [];
  const run = async (client: number): Promise<void> => {
    const agent = o.keepAlive === false ? undefined : new Agent({ keepAlive: true, maxSockets: 1, ca: o.caPem });
    if (agent) agents.push(agent);
    for (let seq = 0; !stopped; seq++) {
      const uid = randomUUID();
      const startedAt = performance.now();
      try {
        const reply = await postReview(o.url, o.caPem, podReview(o.namespace, `load-${client}-${seq}`, uid), {
          agent,
        });
        let problem: string | undefined;
        if (reply.status !== 200) problem = `HTTP ${reply.status}: ${JSON.stringify(reply.body).slice(0, 200)}`;
        else if (reply.body.response?.uid !== uid || reply.body.response?.allowed !== true)
          problem = `unexpected review response ${JSON.stringify(reply.body.response).slice(0, 200)}`;
        else problem = o.check?.(reply);
        outcomes.push({
          client,
          seq,
          startedAt,
          endedAt: performance.now(),
          result: problem === undefined ? 'ok' : 'failed',
          detail: problem ?? 'ok',
          reply,
        });
      } catch (error) {
        const e = error as NodeJS.ErrnoException & { progress?: { secured: boolean; sent: boolean } };
        const refused =
          e.code === 'ECONNREFUSED' || (e.progress !== undefined && !e.progress.secured && !e.progress.sent);
        outcomes.push({
          client,
          seq,
          startedAt,
          endedAt: performance.now(),
          result: refused ? 'not-accepted' : 'failed',
          detail: `${e.code ?? ''} ${e.message} ${JSON.stringify(e.progress ?? {})}`.trim(),
        });
        if (refused && o.stopOnRefused) return;
        if (refused) await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
  };
  const done = Promise.all(Array.from({ length: o.clients }, (_, i) => run(i))).then(() => {
    for (const agent of agents) agent.destroy();
  });
  return {
    outcomes,
    done,
    async stop() {
      stopped = true;
      await done;
    },
  };
}

/** Counts by result plus the first few failures, for a readable assertion message. */
export function summarize(outcomes: readonly Outcome[]): {
  ok: number;
  notAccepted: number;
  failed: number;
  failures: string[];
} {
  const failures = outcomes.filter((x) => x.result === 'failed');
  return {
    ok: outcomes.filter((x) => x.result === 'ok').length,
    notAccepted: outcomes.filter((x) => x.result === 'not-accepted').length,
    failed: failures.length,
    failures: failures.slice(0, 10).map((f) => `client ${f.client} #${f.seq}: ${f.detail}`),
  };
}
