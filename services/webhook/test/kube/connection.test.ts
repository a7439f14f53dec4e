/** Credentials: kubeconfig files (YAML), the in-cluster service account, token files re-read. */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import {
  connectionFromKubeconfig,
  FileToken,
  inClusterConnection,
  kubeconfigConnection,
  loadConnection,
  TOKEN_REREAD_MS,
} from '../../src/kube/connection.js';

const b64 = (s: string): string => Buffer.from(s).toString('base64');

function tempDir(): string {
  return mkdtempSync(join(tmpdir(), 'webhook-conn-'));
}

/** A kubeconfig document with one context `ctx` → cluster `c` / user `u`. */
function doc(cluster: Record<string, unknown>, user: Record<string, unknown> | undefined): Record<string, unknown> {
  return {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [
      { name: 'other', cluster: { server: 'https://wrong.example:1' } },
      { name: 'c', cluster },
    ],
    users: user === undefined ? [] : [{ name: 'u', user }],
    contexts: [{ name: 'ctx', context: { cluster: 'c', ...(user !== undefined && { user: 'u' }) } }],
    'current-context': 'ctx',
  };
}

describe('kubeconfig', () => {
  it('reads a YAML file: the current context, CA and client certificate inline, the server path prefix kept', async () => {
    const dir = tempDir();
    const path = join(dir, 'config');
    writeFileSync(
      path,
      [
        'apiVersion: v1',
        'kind: Config',
        'clusters:',
        '- name: c',
        '  cluster:',
        '    server: https://10.0.0.1:6443/prefix/',
        `    certificate-authority-data: ${b64('CA PEM')}`,
        '    tls-server-name: kubernetes.default',
        'users:',
        '- name: u',
        '  user:',
        `    client-certificate-data: ${b64('CERT PEM')}`,
        `    client-key-data: ${b64('KEY PEM')}`,
        'contexts:',
        '- name: ctx',
        '  context:',
        '    cluster: c',
        '    user: u',
        'current-context: ctx',
        '',
      ].join('\n'),
    );
    const c = await kubeconfigConnection(path);
    expect(c.server.href).toBe('https://10.0.0.1:6443/prefix');
    expect(c.ca?.toString()).toBe('CA PEM');
    expect(c.verifyServer).toBe(true);
    expect(c.tlsServerName).toBe('kubernetes.default');
    expect(c.clientCert?.cert.toString()).toBe('CERT PEM');
    expect(c.clientCert?.key.toString()).toBe('KEY PEM');
    expect(c.token).toBeUndefined();
    expect(c.describe).toBe('kubeconfig context ctx (cluster c, user u)');
    rmSync(dir, { recursive: true });
  });

  it('resolves relative file paths against the kubeconfig file, as client-go does', () => {
    const dir = tempDir();
    mkdirSync(join(dir, 'pki'));
    writeFileSync(join(dir, 'pki', 'ca.crt'), 'CA FILE');
    writeFileSync(join(dir, 'pki', 'client.crt'), 'CERT FILE');
    writeFileSync(join(dir, 'pki', 'client.key'), 'KEY FILE');
    writeFileSync(join(dir, 'token'), 'file-token\n');
    const c = connectionFromKubeconfig(
      doc(
        { server: 'https://127.0.0.1:6443', 'certificate-authority': 'pki/ca.crt' },
        { 'client-certificate': 'pki/client.crt', 'client-key': join(dir, 'pki', 'client.key'), tokenFile: 'token' },
      ),
      dir,
    );
    expect(c.ca?.toString()).toBe('CA FILE');
    expect(c.clientCert?.cert.toString()).toBe('CERT FILE');
    expect(c.clientCert?.key.toString()).toBe('KEY FILE');
    expect(c.token?.token()).toBe('file-token');
    rmSync(dir, { recursive: true });
  });

  it('a token user; insecure-skip-tls-verify; plain http', () => {
    const c = connectionFromKubeconfig(
      doc({ server: 'http://127.0.0.1:8001', 'insecure-skip-tls-verify': true }, { token: 'abc' }),
      '/',
    );
    expect(c.server.protocol).toBe('http:');
    expect(c.verifyServer).toBe(false);
    expect(c.token?.token()).toBe('abc');
    expect(c.clientCert).toBeUndefined();
  });

  it.each([
    [{ exec: { command: 'aws' } }, /exec credential plugins are not supported.*service account/],
    [{ 'auth-provider': { name: 'oidc' } }, /auth-provider plugins are not supported/],
    [{ username: 'admin', password: 'x' }, /basic authentication is not supported/],
    [{ token: 't', as: 'someone' }, /impersonation is not supported/],
    [{ 'client-certificate-data': b64('C') }, /needs both the certificate and the key/],
  ])('refuses user %j with a clear message', (user, message) => {
    expect(() => connectionFromKubeconfig(doc({ server: 'https://h:1' }, user), '/')).toThrow(message);
  });

  it.each([
    [{ ...doc({ server: 'https://h:1' }, undefined), 'current-context': undefined }, /no current-context/],
    [{ ...doc({ server: 'https://h:1' }, undefined), 'current-context': 'nope' }, /contexts has no entry named "nope"/],
    [doc({}, undefined), /cluster "c" has no server/],
    [doc({ server: 'ftp://h' }, undefined), /neither https nor http/],
    [doc({ server: 'https://h:1', 'proxy-url': 'http://proxy:3128' }, undefined), /proxy-url is not supported/],
    [doc({ server: 'https://h:1', 'insecure-skip-tls-verify': 'yes' }, undefined), /must be true or false/],
    [doc({ server: 'https://h:1', 'certificate-authority': 'missing.crt' }, undefined), /cannot read .*missing\.crt/],
    ['just a string', /not a kubeconfig/],
  ])('rejects an unusable kubeconfig (%#)', (document, message) => {
    expect(() => connectionFromKubeconfig(document, '/nonexistent')).toThrow(message);
  });

  it('names the file when it is not YAML, and when it is unusable', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'broken'), 'clusters: [unclosed\n');
    await expect(kubeconfigConnection(join(dir, 'broken'))).rejects.toThrow(/kubeconfig .*broken is not valid YAML/);
    writeFileSync(join(dir, 'empty'), 'apiVersion: v1\nkind: Config\n');
    await expect(kubeconfigConnection(join(dir, 'empty'))).rejects.toThrow(/kubeconfig .*empty: no current-context/);
    await expect(kubeconfigConnection(join(dir, 'absent'))).rejects.toThrow(/cannot read kubeconfig/);
    rmSync(dir, { recursive: true });
  });
});

describe('in-cluster', () => {
  function serviceAccount(): string {
    const dir = tempDir();
    writeFileSync(join(dir, 'ca.crt'), 'SA CA');
    writeFileSync(join(dir, 'token'), 'sa-token-1');
    return dir;
  }

  it('reads KUBERNETES_SERVICE_HOST/PORT, the CA and the token of the service account', () => {
    const dir = serviceAccount();
    const c = inClusterConnection(
      { KUBERNETES_SERVICE_HOST: '10.96.0.1', KUBERNETES_SERVICE_PORT: '443' },
      { serviceAccountDir: dir },
    );
    expect(c.server.href).toBe('https://10.96.0.1/');
    expect(c.ca?.toString()).toBe('SA CA');
    expect(c.verifyServer).toBe(true);
    expect(c.token?.token()).toBe('sa-token-1');
    rmSync(dir, { recursive: true });
  });

  it('brackets an IPv6 service address', () => {
    const dir = serviceAccount();
    const c = inClusterConnection(
      { KUBERNETES_SERVICE_HOST: 'fd00::1', KUBERNETES_SERVICE_PORT: '6443' },
      { serviceAccountDir: dir },
    );
    expect(c.server.host).toBe('[fd00::1]:6443');
    rmSync(dir, { recursive: true });
  });

  it('outside a cluster, or without the service account files, says what is missing', async () => {
    expect(() => inClusterConnection({})).toThrow(/not running in a cluster.*pass --kubeconfig/);
    expect(() => inClusterConnection({ KUBERNETES_SERVICE_HOST: '10.96.0.1' })).toThrow(/KUBERNETES_SERVICE_PORT/);
    const dir = tempDir();
    expect(() =>
      inClusterConnection(
        { KUBERNETES_SERVICE_HOST: '10.96.0.1', KUBERNETES_SERVICE_PORT: '443' },
        { serviceAccountDir: dir },
      ),
    ).toThrow(/cannot read the service account CA/);
    writeFileSync(join(dir, 'ca.crt'), 'SA CA');
    expect(() =>
      inClusterConnection(
        { KUBERNETES_SERVICE_HOST: '10.96.0.1', KUBERNETES_SERVICE_PORT: '443' },
        { serviceAccountDir: dir },
      ),
    ).toThrow(/ENOENT/);
    await expect(loadConnection(undefined, {})).rejects.toThrow(/pass --kubeconfig/);
    rmSync(dir, { recursive: true });
  });
});

describe('FileToken', () => {
  it('re-reads the file once the period has passed (a rotated service-account token)', () => {
    const dir = tempDir();
    const path = join(dir, 'token');
    writeFileSync(path, 'one\n');
    let now = 0;
    const token = new FileToken(path, { now: () => now });
    expect(token.token()).toBe('one');
    writeFileSync(path, 'two');
    now = TOKEN_REREAD_MS - 1;
    expect(token.token()).toBe('one');
    now = TOKEN_REREAD_MS;
    expect(token.token()).toBe('two');
    rmSync(dir, { recursive: true });
  });

  it('keeps the last token when a re-read fails, reports it, and tries again a period later', () => {
    const dir = tempDir();
    const path = join(dir, 'token');
    writeFileSync(path, 'one');
    let now = 0;
    const errors: unknown[] = [];
    const token = new FileToken(path, { now: () => now, onReadError: (e) => errors.push(e) });
    rmSync(path);
    now = TOKEN_REREAD_MS;
    expect(token.token()).toBe('one');
    expect(errors).toHaveLength(1);
    expect(token.token()).toBe('one');
    expect(errors).toHaveLength(1);
    writeFileSync(path, '');
    now = 2 * TOKEN_REREAD_MS;
    expect(token.token()).toBe('one');
    expect(String(errors[1])).toMatch(/is empty/);
    writeFileSync(path, 'three');
    now = 3 * TOKEN_REREAD_MS;
    expect(token.token()).toBe('three');
    rmSync(dir, { recursive: true });
  });

  it('invalidate() makes the next call read the file again', () => {
    const dir = tempDir();
    const path = join(dir, 'token');
    writeFileSync(path, 'one');
    const token = new FileToken(path, { now: () => 0 });
    writeFileSync(path, 'two');
    expect(token.token()).toBe('one');
    token.invalidate();
    expect(token.token()).toBe('two');
    rmSync(dir, { recursive: true });
  });

  it('fails at construction when there is no token to start with', () => {
    expect(() => new FileToken('/nonexistent/token')).toThrow(/ENOENT/);
  });
});
