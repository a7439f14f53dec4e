/**
 * `validate`: the isolation annotations of the instances in a set of manifests, judged exactly as
 * the operator judges them (packages/spec's `parseNodeIsolation` / `parseSandboxIsolation`: the
 * same precompiled schemas, the same messages led by each error's JSON path). No cluster.
 *
 * What counts as an instance (the operator's rule, as far as manifests can show it):
 * - an object of a Kind named by `--instance-kinds` (`group/version/Kind`, any version; or a whole
 *   group), or of a CustomResourceDefinition in the same input labelled `registered-by: kubeplus`;
 * - any other object carrying either isolation annotation: its CRD may be labelled in the
 *   cluster, so it is checked as well. Such an object of a built-in kind (an API group without a
 *   dot: core, apps, batch, …) gets a warning: the operator reads the annotations only on custom
 *   resources. With `--instance-kinds` given, an annotated object of another kind (and of no
 *   labelled CRD in the input) gets a warning too.
 *
 * `decide` is pure; `readDocuments` is the file-reading shell.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import {
  type InstanceKindSelection,
  KUBEPLUS_CRD_LABEL,
  KUBEPLUS_CRD_LABEL_VALUE,
  NODE_ISOLATION_ANNOTATION,
  parseNodeIsolation,
  parseSandboxIsolation,
  SANDBOX_ISOLATION_ANNOTATION,
} from '@kubeplus-isolation/spec';
import { loadAllYaml } from '@kubernetes/client-node';

/** One YAML/JSON document of the input. */
export interface Document {
  /** File path, or `-` for standard input. */
  source: string;
  /** 1-based among the non-empty documents of the source. */
  document: number;
  /** 1-based line where the document starts. */
  line: number;
  /** The parsed object, or the parse error's message. */
  object?: unknown;
  error?: string;
}

export interface AnnotationVerdict {
  annotation: string;
  valid: boolean;
  /** The operator's messages, each led by the JSON path it concerns (empty when valid). */
  errors: string[];
}

export interface InstanceFinding {
  source: string;
  document: number;
  line: number;
  apiVersion: string;
  kind: string;
  namespace?: string;
  name: string;
  /** Why it is taken for an instance. */
  selectedBy: 'instance-kinds' | 'crd-label' | 'annotation';
  annotations: AnnotationVerdict[];
}

export interface Problem {
  source: string;
  document?: number;
  line?: number;
  message: string;
}

export interface ValidateResult {
  /** No invalid annotation and no unreadable document. */
  valid: boolean;
  sources: number;
  documents: number;
  instances: InstanceFinding[];
  /** Invalid YAML/JSON (they fail validation: what cannot be read cannot be judged). */
  errors: Problem[];
  /** Annotations the operator would not read; they do not fail validation. */
  warnings: Problem[];
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function str(v: unknown): string {
  return typeof v === 'string' ? v : '';
}

function groupOf(apiVersion: string): string {
  const slash = apiVersion.lastIndexOf('/');
  return slash < 0 ? '' : apiVersion.slice(0, slash);
}

/** The objects of a document: itself, or the items of a `List` (as `kubectl get -o yaml` and some renderers write). */
function objectsOf(value: unknown): Record<string, unknown>[] {
  if (!isObject(value)) return [];
  if (str(value.kind).endsWith('List') && Array.isArray(value.items)) return value.items.filter(isObject);
  return [value];
}

/** `group/Kind` of every CRD in the input that KubePlus registered (`registered-by: kubeplus`). */
function labelledCrdKinds(objects: readonly Record<string, unknown>[]): Set<string> {
  const out = new Set<string>();
  for (const o of objects) {
    if (o.kind !== 'CustomResourceDefinition' || !groupOf(str(o.apiVersion)).startsWith('apiextensions.k8s.io'))
      continue;
    const meta = isObject(o.metadata) ? o.metadata : {};
    const labels = isObject(meta.labels) ? meta.labels : {};
    const spec = isObject(o.spec) ? o.spec : {};
    const names = isObject(spec.names) ? spec.names : {};
    if (labels[KUBEPLUS_CRD_LABEL] === KUBEPLUS_CRD_LABEL_VALUE && str(spec.group) !== '' && str(names.kind) !== '') {
      out.add(`${str(spec.group)}/${str(names.kind)}`);
    }
  }
  return out;
}

const PARSERS: ReadonlyArray<[string, (text: unknown) => { ok: true } | { ok: false; errors: string[] }]> = [
  [NODE_ISOLATION_ANNOTATION, parseNodeIsolation],
  [SANDBOX_ISOLATION_ANNOTATION, parseSandboxIsolation],
];

/** Judges every instance in `documents`. Pure. */
export function decide(
  documents: readonly Document[],
  selection: InstanceKindSelection,
  sources = new Set(documents.map((d) => d.source)).size,
): ValidateResult {
  const errors: Problem[] = [];
  const warnings: Problem[] = [];
  const located: Array<{ doc: Document; object: Record<string, unknown> }> = [];
  for (const doc of documents) {
    if (doc.error !== undefined) {
      errors.push({ source: doc.source, document: doc.document, line: doc.line, message: doc.error });
      continue;
    }
    for (const object of objectsOf(doc.object)) located.push({ doc, object });
  }
  const labelled = labelledCrdKinds(located.map((l) => l.object));
  const configured = selection.groups.length > 0 || selection.kinds.length > 0;
  const instances: InstanceFinding[] = [];
  for (const { doc, object } of located) {
    const apiVersion = str(object.apiVersion);
    const kind = str(object.kind);
    const group = groupOf(apiVersion);
    const meta = isObject(object.metadata) ? object.metadata : {};
    const annotations = isObject(meta.annotations) ? meta.annotations : {};
    const present = PARSERS.filter(([key]) => Object.hasOwn(annotations, key));
    let selectedBy: InstanceFinding['selectedBy'] | undefined;
    if (selection.groups.includes(group) || selection.kinds.some((k) => k.group === group && k.kind === kind))
      selectedBy = 'instance-kinds';
    else if (labelled.has(`${group}/${kind}`)) selectedBy = 'crd-label';
    else if (present.length > 0) selectedBy = 'annotation';
    if (selectedBy === undefined) continue;
    const where = { source: doc.source, document: doc.document, line: doc.line };
    const name = str(meta.name);
    const label = `${apiVersion} ${kind} ${name === '' ? '(no name)' : name}`;
    if (selectedBy === 'annotation' && !group.includes('.')) {
      warnings.push({
        ...where,
        message: `${label}: the operator reads the isolation annotations only on instances of custom resource kinds, not on a ${kind === '' ? 'built-in object' : kind}`,
      });
    } else if (selectedBy === 'annotation' && configured) {
      warnings.push({
        ...where,
        message: `${label}: not an instance Kind (not in --instance-kinds, and no CRD labelled ${KUBEPLUS_CRD_LABEL}=${KUBEPLUS_CRD_LABEL_VALUE} for it in the input): the operator ignores it unless its CRD is labelled so in the cluster`,
      });
    }
    const namespace = str(meta.namespace);
    instances.push({
      ...where,
      apiVersion,
      kind,
      ...(namespace === '' ? {} : { namespace }),
      name,
      selectedBy,
      annotations: present.map(([annotation, parse]) => {
        const r = parse(annotations[annotation]);
        return { annotation, valid: r.ok, errors: r.ok ? [] : r.errors };
      }),
    });
  }
  const invalid = instances.some((i) => i.annotations.some((a) => !a.valid));
  return { valid: !invalid && errors.length === 0, sources, documents: documents.length, instances, errors, warnings };
}

/**
 * The documents of one YAML (or JSON) text, split at `---` lines as a YAML stream is, each parsed
 * on its own so a broken one is reported with its place and the others are still judged. Empty
 * documents (only comments or blank lines, as Helm renders them) are skipped.
 */
export function splitDocuments(source: string, text: string): Document[] {
  const chunks: Array<{ line: number; lines: string[] }> = [];
  let current: { line: number; lines: string[] } = { line: 1, lines: [] };
  const lines = text.split(/\r?\n/);
  lines.forEach((raw, i) => {
    const marker = /^---(?:\s+(.*))?$/.exec(raw);
    if (marker !== null || raw === '...') {
      chunks.push(current);
      const inline = marker?.[1];
      // `--- {…}` starts a document on the marker's own line (line i + 1); a bare `---` on the next.
      current = inline === undefined ? { line: i + 2, lines: [] } : { line: i + 1, lines: [inline] };
      return;
    }
    current.lines.push(raw);
  });
  chunks.push(current);
  const out: Document[] = [];
  for (const chunk of chunks) {
    const content = chunk.lines.filter((l) => l.trim() !== '' && !l.trimStart().startsWith('#'));
    // Empty, or an explicit null (`~`, `null`): no object, as kubectl and Argo CD take it.
    if (content.length === 0 || (content.length === 1 && /^\s*(~|null|Null|NULL)\s*$/.test(content[0] ?? ''))) continue;
    const firstContent = chunk.lines.indexOf(content[0] as string);
    const document = out.length + 1;
    const line = chunk.line + firstContent;
    try {
      const values = loadAllYaml(chunk.lines.join('\n')).filter((v) => v !== null && v !== undefined);
      for (const object of values) out.push({ source, document, line, object });
    } catch (e) {
      out.push({ source, document, line, error: `not valid YAML/JSON: ${(e as Error).message.split('\n')[0]}` });
    }
  }
  return out;
}

const MANIFEST = /\.(ya?ml|json)$/i;

/** The manifest files under `dir` (`.yaml`, `.yml`, `.json`), sorted; directories starting with `.` skipped. */
export function manifestFiles(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      if (!entry.name.startsWith('.')) out.push(...manifestFiles(path));
    } else if (entry.isFile() && MANIFEST.test(entry.name)) out.push(path);
  }
  return out;
}

/** Reads `paths` (files, directories, or `-` for `stdin`). Throws a plain Error naming a path that cannot be read. */
export function readDocuments(
  paths: readonly string[],
  stdin: () => string,
): { documents: Document[]; sources: number } {
  const documents: Document[] = [];
  let sources = 0;
  for (const path of paths) {
    if (path === '-') {
      documents.push(...splitDocuments('-', stdin()));
      sources++;
      continue;
    }
    let files: string[];
    try {
      files = statSync(path).isDirectory() ? manifestFiles(path) : [path];
    } catch (e) {
      throw new Error(`cannot read ${path}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
    }
    for (const file of files) {
      let text: string;
      try {
        text = readFileSync(file, 'utf8');
      } catch (e) {
        throw new Error(`cannot read ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
      }
      documents.push(...splitDocuments(file, text));
      sources++;
    }
  }
  return { documents, sources };
}

function at(p: { source: string; line?: number | undefined; document?: number | undefined }): string {
  return p.line === undefined ? p.source : `${p.source}:${p.line} (document ${p.document})`;
}

/** The result for a person. */
export function formatValidate(r: ValidateResult): string {
  const out: string[] = [];
  for (const i of r.instances) {
    if (i.annotations.every((a) => a.valid)) continue;
    const id = i.namespace === undefined ? i.name : `${i.namespace}/${i.name}`;
    out.push(`${at(i)}: ${i.apiVersion} ${i.kind} ${id}`);
    for (const a of i.annotations) {
      if (a.valid) continue;
      out.push(`  ${a.annotation} is invalid:`);
      for (const e of a.errors) out.push(`    ${e}`);
    }
  }
  for (const e of r.errors) out.push(`${at(e)}: ${e.message}`);
  for (const w of r.warnings) out.push(`${at(w)}: warning: ${w.message}`);
  const annotated = r.instances.filter((i) => i.annotations.length > 0).length;
  const invalid = r.instances.reduce((n, i) => n + i.annotations.filter((a) => !a.valid).length, 0);
  out.push(
    `${r.valid ? 'valid' : 'INVALID'}: ${r.sources} file(s), ${r.documents} document(s), ${r.instances.length} instance(s), ${annotated} with isolation annotations, ${invalid} invalid annotation(s), ${r.errors.length} unreadable document(s)`,
  );
  return `${out.join('\n')}\n`;
}
