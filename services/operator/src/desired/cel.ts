/**
 * Safe construction of CEL source text. Every value the operator puts into a policy expression
 * goes through `celString`, so no name, however odd, can change an expression's meaning.
 */

function hex(n: number, width: number): string {
  return n.toString(16).toUpperCase().padStart(width, '0');
}

/**
 * A double-quoted CEL string literal denoting exactly `s`. Printable ASCII stays readable; quote
 * and backslash are escaped; everything else is written as `\uXXXX` / `\UXXXXXXXX`, so the
 * literal is plain ASCII without line breaks. A lone UTF-16 surrogate (not a Unicode scalar
 * value, so not representable in CEL) becomes U+FFFD.
 */
export function celString(s: string): string {
  let out = '"';
  for (const ch of s) {
    const cp = ch.codePointAt(0) ?? 0xfffd;
    if (ch === '"' || ch === '\\') out += `\\${ch}`;
    else if (cp >= 0x20 && cp <= 0x7e) out += ch;
    else if (ch === '\n') out += '\\n';
    else if (ch === '\r') out += '\\r';
    else if (ch === '\t') out += '\\t';
    else if (cp >= 0xd800 && cp <= 0xdfff) out += '\\uFFFD';
    else if (cp <= 0xffff) out += `\\u${hex(cp, 4)}`;
    else out += `\\U${hex(cp, 8)}`;
  }
  return `${out}"`;
}

/** A CEL list literal of string literals. */
export function celStringList(items: readonly string[]): string {
  return `[${items.map(celString).join(', ')}]`;
}

/**
 * A CEL expression giving the string at `path` under `root`, or `''` when any step is absent.
 * `has()` guards every step, so it never errors on a partial object.
 */
export function celOptionalString(root: string, path: readonly string[]): string {
  const guards: string[] = [];
  let at = root;
  for (const field of path) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(field))
      throw new Error(`not a plain CEL field name: ${JSON.stringify(field)}`);
    at = `${at}.${field}`;
    guards.push(`has(${at})`);
  }
  return `${guards.join(' && ')} ? ${at} : ''`;
}

/** A CEL map literal from string keys to string literals, keys in the record's order. */
export function celStringMap(entries: Readonly<Record<string, string>>): string {
  return `{${Object.entries(entries)
    .map(([k, v]) => `${celString(k)}: ${celString(v)}`)
    .join(', ')}}`;
}
