import { mkdtempSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TLSSocket } from 'node:tls';
import { afterEach, beforeAll, beforeEach, describe, expect, it, jest } from '@jest/globals';
import { CertificateReloader, certificateInfo, createHttpsServer, loadKeyPair } from '../../src/tls.js';
import { type GeneratedPair, generatePair } from '../helpers/certs.js';
import { recordingLogger } from '../helpers/fake-informer.js';

// Real sockets, TLS and file watching on a shared 2-core machine: generous per-test bounds.
jest.setTimeout(30_000);

/** A directory laid out like a mounted Secret: tls.crt → ..data/tls.crt, ..data → ..<version>. */
class SecretVolume {
  readonly dir = mkdtempSync(join(tmpdir(), 'secret-volume-'));
  #version = 0;

  constructor() {
    symlinkSync('..data/tls.crt', join(this.dir, 'tls.crt'));
    symlinkSync('..data/tls.key', join(this.dir, 'tls.key'));
  }

  get certFile(): string {
    return join(this.dir, 'tls.crt');
  }

  get keyFile(): string {
    return join(this.dir, 'tls.key');
  }

  /** Writes a new version directory and swaps ..data to it atomically, as the kubelet does. */
  async publish(commonName: string, opts: { keyFrom?: string } = {}): Promise<{ fingerprint256: string }> {
    const version = `..v${++this.#version}`;
    const pair = await generatePair(join(this.dir, version), commonName);
    if (opts.keyFrom !== undefined) writeFileSync(pair.keyFile, readFileSync(opts.keyFrom));
    symlinkSync(version, join(this.dir, '..data_tmp'));
    renameSync(join(this.dir, '..data_tmp'), join(this.dir, '..data'));
    return { fingerprint256: certificateInfo(pair.cert).fingerprint256 };
  }

  remove(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}

interface Seen {
  fingerprint256: string;
  reusedSocket: boolean;
  body: string;
}

function get(port: number, agent: https.Agent): Promise<Seen> {
  return new Promise((resolve, reject) => {
    const req = https.get({ host: '127.0.0.1', port, path: '/', agent, rejectUnauthorized: false }, (res) => {
      const fingerprint256 = (res.socket as TLSSocket).getPeerCertificate().fingerprint256;
      let body = '';
      res.on('data', (c: Buffer) => {
        body += c.toString();
      });
      res.on('end', () => resolve({ fingerprint256, reusedSocket: req.reusedSocket, body }));
    });
    req.on('error', reject);
  });
}

async function eventually(check: () => Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`gave up waiting for: ${what}`);
}

describe('TLS serving with certificate reload', () => {
  let volume: SecretVolume;
  let server: https.Server;
  let reloader: CertificateReloader;
  let port: number;
  const reloads: string[] = [];
  let logger: ReturnType<typeof recordingLogger>;
  let first: { fingerprint256: string };

  async function start(pollIntervalMs: number, watchDirectories = true): Promise<void> {
    first = await volume.publish('webhook-v1');
    const files = { certFile: volume.certFile, keyFile: volume.keyFile };
    const pair = loadKeyPair(files);
    server = createHttpsServer((_req, res) => res.end('ok'), pair);
    logger = recordingLogger();
    reloader = new CertificateReloader(server, files, pair, {
      pollIntervalMs,
      watchDirectories,
      logger,
      onReload: (r) => reloads.push(r),
    });
    reloader.start();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  }

  beforeEach(() => {
    volume = new SecretVolume();
    reloads.length = 0;
  });
  afterEach(async () => {
    reloader.stop();
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
    volume.remove();
  });

  it('keeps idle connections longer than the API server does (90 s), so the API server closes them first', async () => {
    await start(0);
    expect(server.keepAliveTimeout).toBeGreaterThan(90_000);
    expect(server.headersTimeout).toBeLessThanOrEqual(server.requestTimeout);
  });

  it('refuses TLS 1.1 (a client able to speak it is turned away)', async () => {
    await start(0);
    // The client lowers its own OpenSSL security level so that only the server can say no.
    const tls11 = (p: number) =>
      new Promise<string>((resolve) => {
        const req = https.get(
          {
            host: '127.0.0.1',
            port: p,
            rejectUnauthorized: false,
            minVersion: 'TLSv1',
            maxVersion: 'TLSv1.1',
            ciphers: 'DEFAULT:@SECLEVEL=0',
          },
          (res) => {
            resolve(`connected with ${(res.socket as TLSSocket).getProtocol()}`);
            res.resume();
          },
        );
        req.on('error', (e: NodeJS.ErrnoException) => resolve(`refused: ${e.code}`));
      });
    // Control: the same client does get through to a server that allows TLS 1.1.
    const lax = https.createServer(
      {
        cert: readFileSync(volume.certFile),
        key: readFileSync(volume.keyFile),
        minVersion: 'TLSv1',
        ciphers: 'DEFAULT:@SECLEVEL=0',
      },
      (_q, r) => r.end(),
    );
    await new Promise<void>((resolve) => lax.listen(0, '127.0.0.1', resolve));
    expect(await tls11((lax.address() as AddressInfo).port)).toBe('connected with TLSv1.1');
    lax.close();
    expect(await tls11(port)).toBe('refused: EPROTO');
  });

  it('a Secret update (..data swap) is picked up by fs.watch: new connections get the new certificate, an open keep-alive connection keeps working', async () => {
    await start(0); // watching only: no polling
    const keepAlive = new https.Agent({ keepAlive: true, maxSockets: 1 });
    const before = await get(port, keepAlive);
    expect(before).toMatchObject({ fingerprint256: first.fingerprint256, body: 'ok' });

    const second = await volume.publish('webhook-v2');
    await eventually(async () => {
      const fresh = new https.Agent({ keepAlive: false });
      return (await get(port, fresh)).fingerprint256 === second.fingerprint256;
    }, 'the new certificate on a new connection');

    const again = await get(port, keepAlive);
    expect(again).toMatchObject({ reusedSocket: true, body: 'ok', fingerprint256: first.fingerprint256 });
    expect(reloads).toEqual(['success']);
    expect(logger.records.find((r) => r.message === 'TLS certificate reloaded')?.meta).toMatchObject({
      fingerprint256: second.fingerprint256,
    });
    keepAlive.destroy();
  });

  it('the periodic stat check alone also reloads (no watch event needed)', async () => {
    await start(0);
    reloader.stop(); // no fs.watch: only explicit checks, as the poll timer would run them
    const second = await volume.publish('webhook-v2');
    expect(reloader.check()).toBe(true);
    expect((await get(port, new https.Agent())).fingerprint256).toBe(second.fingerprint256);
    expect(reloader.check()).toBe(false);
  });

  it('a bad new pair (key of another certificate) keeps the old certificate and logs an error, once', async () => {
    await start(0);
    reloader.stop();
    const stray = await generatePair(join(volume.dir, 'stray'), 'someone-else');
    await volume.publish('webhook-v2', { keyFrom: stray.keyFile });
    expect(reloader.check()).toBe(false);
    expect(reloader.check()).toBe(false);
    expect((await get(port, new https.Agent())).fingerprint256).toBe(first.fingerprint256);
    expect(reloads).toEqual(['failure']);
    const errors = logger.records.filter((r) => r.level === 'error');
    expect(errors).toHaveLength(1);
    expect(String(errors[0]?.meta.error)).toMatch(/do not form a valid pair/);

    // A fixed pair afterwards is picked up.
    const fixed = await volume.publish('webhook-v3');
    expect(reloader.check()).toBe(true);
    expect((await get(port, new https.Agent())).fingerprint256).toBe(fixed.fingerprint256);
  });

  it('the poll timer reloads when directory watching is off', async () => {
    await start(20, false);
    const second = await volume.publish('webhook-v2');
    await eventually(
      async () => (await get(port, new https.Agent())).fingerprint256 === second.fingerprint256,
      'the polled reload',
    );
  });
});

describe('loadKeyPair', () => {
  const dir = mkdtempSync(join(tmpdir(), 'keypair-'));
  let a: GeneratedPair;
  let b: GeneratedPair;
  beforeAll(async () => {
    a = await generatePair(join(dir, 'a'), 'a');
    b = await generatePair(join(dir, 'b'), 'b');
  });

  it('loads a matching pair', () => {
    expect(loadKeyPair(a)).toEqual({ cert: a.cert, key: a.key });
  });

  it('names the problem: missing file, not PEM, mismatched key', () => {
    expect(() => loadKeyPair({ certFile: join(dir, 'nope.crt'), keyFile: a.keyFile })).toThrow(
      /cannot read certificate file .*nope\.crt/,
    );
    expect(() => loadKeyPair({ certFile: a.certFile, keyFile: join(dir, 'nope.key') })).toThrow(/cannot read key file/);
    writeFileSync(join(dir, 'junk.crt'), 'not a certificate');
    expect(() => loadKeyPair({ certFile: join(dir, 'junk.crt'), keyFile: a.keyFile })).toThrow(/not a PEM certificate/);
    expect(() => loadKeyPair({ certFile: a.certFile, keyFile: b.keyFile })).toThrow(/do not form a valid pair/);
  });
});
