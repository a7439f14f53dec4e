/**
 * The command line: subcommands, flags, help, exit statuses. `run` never throws and never exits:
 * it writes to the given streams and returns the exit status (main.ts sets it).
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import {
  DEFAULT_HANDLER_LEVELS,
  DEFAULT_PLATFORM_NAMESPACE,
  isDns1123Label,
  NODE_ISOLATION_RESOLVED_ANNOTATION,
  parseHandlerLevels,
  parseInstanceKinds,
  parseNodeIsolation,
} from '@kubeplus-isolation/spec';
import { CoreV1Api, type KubernetesObject } from '@kubernetes/client-node';
import { admittedVerdict, formatVerdict, type Verdict } from './check.js';
import { explain, formatExplanation } from './explain.js';
import {
  apiMessage,
  CHECKABLE_KINDS,
  ClusterError,
  dryRunCreate,
  gatherFacts,
  loadKubeConfig,
  statusOf,
} from './kube.js';
import { decide, formatValidate, readDocuments, splitDocuments } from './validate.js';
import { cliVersion } from './version.js';

export const EXIT = { ok: 0, findings: 1, usage: 2, cluster: 3 } as const;

export interface Io {
  stdout: (s: string) => void;
  stderr: (s: string) => void;
  stdin: () => string;
  /** The tool's version, for `--version`; unset: `cliVersion()` (the bundle's compiled-in release, or package.json's). */
  version?: string;
}

const PROG = 'kubeplus-isolation';

const EXIT_HELP = `Exit status:
  0  valid / explained / admitted
  1  validate: an invalid annotation or an unreadable document; explain: no such namespace;
     check: admission refuses the object
  2  usage error (unknown flag, missing argument, unreadable path)
  3  the cluster cannot be reached or read (kubeconfig, connection, permission)`;

const HELP: Record<string, string> = {
  main: `${PROG}: check kubeplus-isolation's annotations before merging, and ask a cluster why.
Also a kubectl plugin: kubectl kubeplus-isolation <command>.

Usage:
  ${PROG} validate FILE|DIR|- ...       judge the isolation annotations of manifests (no cluster)
  ${PROG} explain NAMESPACE             the isolation of a namespace, and what does not comply
  ${PROG} check FILE -n NAMESPACE       what admission would do to a Pod or Sandbox (dry run)
  ${PROG} COMMAND --help                a command's flags
  ${PROG} --version                     print the version

Common flags:
  -o, --output text|json   text for a person (default), json for tools
      --kubeconfig PATH    kubeconfig (default: $KUBECONFIG, ~/.kube/config, in-cluster)
      --context NAME       kubeconfig context

${EXIT_HELP}
`,
  validate: `Usage: ${PROG} validate FILE|DIR|- ... [--instance-kinds KINDS] [-o text|json]

Reads Kubernetes YAML or JSON (multi-document, List kinds expanded, as Argo CD or Flux render
them; a DIR is read recursively for *.yaml, *.yml, *.json; - is standard input) and judges every
instance's kubeplus.io/node-isolation and kubeplus.io/sandbox-isolation annotations exactly as the
operator does: the same schemas and the same messages, each led by the JSON path of the error.
No cluster is needed.

Instances: objects of the kinds in --instance-kinds, of a CustomResourceDefinition in the input
labelled registered-by=kubeplus, and any other object carrying either annotation (its CRD may be
labelled in the cluster). Annotations on built-in kinds, and with --instance-kinds on other kinds,
are warned about: the operator does not read them. Warnings do not fail.

Flags:
      --instance-kinds KINDS   as the operator's flag: group/version/Kind entries or whole groups,
                               comma-separated (e.g. cloudark.io/v1/Agent,platformapi.kubeplus)
  -o, --output text|json

${EXIT_HELP}
`,
  explain: `Usage: ${PROG} explain NAMESPACE [--platform-namespace NS] [--runtime-handler-levels LEVELS] [-o text|json]

Read-only, with your kubeconfig: which instance isolates NAMESPACE, the node mandate in force
(the namespace's resolved annotation), the admission engine (the node-isolation webhook's
registration, the admission-policy engine's NodeIsolation parameter), the sandbox minimum and
mode, each instance's annotations, its RuntimeClass (the generated one, or the platform's class its
annotation names with runtimeClassName, and whether the operator can use it) and admission policies
and whether they are in force (exist and bound), and the Pods and Sandboxes that do not comply, each
with the reason (the operator's audit and compliance report rules).

Flags:
      --platform-namespace NS        KubePlus's namespace, as the operator's flag (default: found from KubePlus's
                                     webhook registration, else ${DEFAULT_PLATFORM_NAMESPACE})
      --runtime-handler-levels L     as the operator's flag, e.g. gvisor=runsc,kata-*=kata
  -o, --output text|json
      --kubeconfig PATH, --context NAME

${EXIT_HELP}
`,
  check: `Usage: ${PROG} check FILE|- -n NAMESPACE [-o text|json]

What admission would do to the Pod or Sandbox in FILE (one object, YAML or JSON), by a server-side
dry run of its CREATE in NAMESPACE (every webhook and admission policy runs; nothing is stored):
the changes to nodeSelector, tolerations and runtimeClassName, or the refusal with its message.
When the namespace mandates a node placement the admitted Pod would still lack, says so (the
webhook is not answering and its failurePolicy Ignore admits Pods unpatched).

Flags:
  -n, --namespace NS   where to create it (default: the kubeconfig context's namespace, else default)
  -o, --output text|json
      --kubeconfig PATH, --context NAME

${EXIT_HELP}
`,
};

class UsageError extends Error {}

const COMMON = {
  help: { type: 'boolean', short: 'h' },
  output: { type: 'string', short: 'o', default: 'text' },
  kubeconfig: { type: 'string' },
  context: { type: 'string' },
} as const;

function parse<T extends Record<string, { type: 'string' | 'boolean'; short?: string; default?: string }>>(
  args: string[],
  options: T,
) {
  try {
    return parseArgs({ args, options: { ...COMMON, ...options }, allowPositionals: true, strict: true });
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
}

function outputOf(v: unknown): 'text' | 'json' {
  if (v === 'text' || v === 'json') return v;
  throw new UsageError(`--output must be text or json, not ${JSON.stringify(v)}`);
}

function json(v: unknown): string {
  return `${JSON.stringify(v, null, 2)}\n`;
}

function validateCommand(args: string[], io: Io): number {
  const { values, positionals } = parse(args, { 'instance-kinds': { type: 'string', default: '' } });
  if (values.help) return help(io, 'validate');
  const output = outputOf(values.output);
  if (positionals.length === 0) throw new UsageError('validate needs at least one FILE, DIR or - (standard input)');
  const kinds = parseInstanceKinds(String(values['instance-kinds']));
  if (!kinds.ok) throw new UsageError(`--instance-kinds: ${kinds.errors.join('; ')}`);
  let read: ReturnType<typeof readDocuments>;
  try {
    read = readDocuments(positionals, io.stdin);
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
  const result = decide(read.documents, kinds.value, read.sources);
  io.stdout(output === 'json' ? json(result) : formatValidate(result));
  return result.valid ? EXIT.ok : EXIT.findings;
}

async function explainCommand(args: string[], io: Io): Promise<number> {
  const { values, positionals } = parse(args, {
    'platform-namespace': { type: 'string', default: '' },
    'runtime-handler-levels': { type: 'string', default: '' },
  });
  if (values.help) return help(io, 'explain');
  const output = outputOf(values.output);
  const [namespace, ...extra] = positionals;
  if (namespace === undefined || extra.length > 0) throw new UsageError('explain needs exactly one NAMESPACE');
  if (!isDns1123Label(namespace)) throw new UsageError(`${JSON.stringify(namespace)} is not a namespace name`);
  const levels = parseHandlerLevels(String(values['runtime-handler-levels']), DEFAULT_HANDLER_LEVELS);
  if (!levels.ok) throw new UsageError(`--runtime-handler-levels: ${levels.errors.join('; ')}`);
  const kc = loadKubeConfig(values.kubeconfig, values.context);
  const facts = await gatherFacts(kc, namespace, String(values['platform-namespace']), levels.value);
  const e = explain(facts);
  io.stdout(output === 'json' ? json(e) : formatExplanation(e));
  return e.exists ? EXIT.ok : EXIT.findings;
}

async function checkCommand(args: string[], io: Io): Promise<number> {
  const { values, positionals } = parse(args, { namespace: { type: 'string', short: 'n' } });
  if (values.help) return help(io, 'check');
  const output = outputOf(values.output);
  const [file, ...extra] = positionals;
  if (file === undefined || extra.length > 0)
    throw new UsageError('check needs exactly one FILE (or - for standard input)');
  let text: string;
  try {
    text = file === '-' ? io.stdin() : readFileSync(file, 'utf8');
  } catch (e) {
    throw new UsageError(`cannot read ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
  const docs = splitDocuments(file, text);
  const bad = docs.find((d) => d.error !== undefined);
  if (bad !== undefined) throw new UsageError(`${file}: ${bad.error}`);
  if (docs.length !== 1) throw new UsageError(`${file} must hold exactly one object (it holds ${docs.length})`);
  const object = docs[0]?.object as KubernetesObject;
  if (typeof object?.kind !== 'string' || typeof object.apiVersion !== 'string')
    throw new UsageError(`${file}: not a Kubernetes object (no apiVersion and kind)`);
  if (!Object.hasOwn(CHECKABLE_KINDS, object.kind) || (object.kind === 'Pod') !== (object.apiVersion === 'v1'))
    throw new UsageError(
      `${file}: check judges a v1 Pod, a Sandbox or a SandboxTemplate, not ${object.apiVersion} ${object.kind}`,
    );
  const kc = loadKubeConfig(values.kubeconfig, values.context);
  const namespace = values.namespace ?? kc.getContextObject(kc.getCurrentContext())?.namespace ?? 'default';
  let mandate: ReturnType<typeof parseNodeIsolation> | undefined;
  try {
    const ns = await kc.makeApiClient(CoreV1Api).readNamespace({ name: namespace });
    const resolved = ns.metadata?.annotations?.[NODE_ISOLATION_RESOLVED_ANNOTATION];
    mandate = resolved === undefined ? undefined : parseNodeIsolation(resolved);
  } catch (e) {
    // Not being allowed to read the Namespace only costs the placement warning.
    if (statusOf(e) === undefined) throw new ClusterError(`reading Namespace ${namespace}: ${apiMessage(e)}`);
  }
  let verdict: Verdict;
  const name = object.metadata?.name ?? '';
  try {
    const admitted = await dryRunCreate(kc, object, namespace);
    verdict = admittedVerdict(
      object,
      JSON.parse(JSON.stringify(admitted.object)),
      admitted.warnings,
      mandate?.ok ? mandate.value : undefined,
    );
  } catch (e) {
    const status = statusOf(e);
    if (status === undefined || status === 401) throw new ClusterError(`dry-run create: ${apiMessage(e)}`);
    verdict = { admitted: false, kind: object.kind, name, status, message: apiMessage(e) };
  }
  io.stdout(output === 'json' ? json({ namespace, ...verdict }) : formatVerdict(verdict, namespace));
  return verdict.admitted ? EXIT.ok : EXIT.findings;
}

function help(io: Io, topic: string): number {
  io.stdout(HELP[topic] ?? HELP.main ?? '');
  return EXIT.ok;
}

/** Runs one command line (`argv` without node and the script). Returns the exit status. */
export async function run(argv: readonly string[], io: Io): Promise<number> {
  const [command, ...args] = argv;
  try {
    switch (command) {
      case 'validate':
        return validateCommand(args, io);
      case 'explain':
        return await explainCommand(args, io);
      case 'check':
        return await checkCommand(args, io);
      case 'version':
      case '--version':
        io.stdout(`${PROG} ${io.version ?? cliVersion()}\n`);
        return EXIT.ok;
      case undefined:
      case 'help':
      case '-h':
      case '--help':
        return help(io, args[0] ?? 'main');
      default:
        throw new UsageError(`unknown command ${JSON.stringify(command)}`);
    }
  } catch (e) {
    if (e instanceof UsageError) {
      io.stderr(
        `${PROG}: ${e.message}\nRun '${PROG} ${command !== undefined && command in HELP ? `${command} ` : ''}--help' for usage.\n`,
      );
      return EXIT.usage;
    }
    if (e instanceof ClusterError) {
      io.stderr(`${PROG}: ${e.message}\n`);
      return EXIT.cluster;
    }
    io.stderr(`${PROG}: ${(e as Error)?.message ?? String(e)}\n`);
    return EXIT.cluster;
  }
}
